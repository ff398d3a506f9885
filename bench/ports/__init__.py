"""PyTorch ports of the buggy Keras programs of the DeepLocalize benchmark (Wardat-ISU/DeepLocalize;
so_*, gh_*) and of buggy Keras/TensorFlow programs of defects4ml (mohmehmo/defects4ml; d4ml_*) and
TensorFlow-Program-Bugs (ForeverZyh/TensorFlow-Program-Bugs; tfpb_*), and, in round 4, of one
program of the DeepFD benchmark (ArabelaTso/DeepFD; dfd_*, its Stack Overflow posts whose program was
found elsewhere as DeepFD patched it) and umlaut's user-study programs (BerkeleyHCI/umlaut; umlaut_*), each beside its fixed twin, for
bench/external.py: plain torch, no harness imports, reached through
`model._target_=bench.ports.<case>.Buggy` and `data._target_=bench.ports.<case>.build`."""
