"""PyTorch ports of the buggy Keras programs of the DeepLocalize benchmark (Wardat-ISU/DeepLocalize),
each beside its fixed twin, for scripts/bench_external.py: plain torch, no harness imports, reached
through `model._target_=external.<case>.Buggy` and `data._target_=external.<case>.build`."""
