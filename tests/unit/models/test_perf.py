"""FLOPs and MFU: the GPT's closed form against a hand count and torch's FLOP counter, the peak
table's lookup, and the perf.peak_tflops key."""
from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from conftest import compose_cfg, train
from harness.state.checkpoint import load_checkpoint, step_checkpoints
from harness.config.run_config import validate_config
from harness.training.perf import flops_per_update, gpt_flops_per_token, measure_flops, mfu, peak_flops, peak_for_name
from harness.models.gpt import GPT, GPTConfig
from harness.logger.tracking import read_metrics

L, H, C, T, V, B = 2, 2, 32, 16, 64, 3  # layers, heads, width, block size, vocab, batch


def hand_count() -> int:
    """One update's matmul FLOPs, written out from the architecture: 2mn per token for an m x n
    weight forward; backward does two matmuls per forward one (input and weight gradients)."""
    block_weights = [(C, 3 * C), (C, C), (C, 4 * C), (4 * C, C)]  # attn.c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj
    lm_head = (C, V)  # the token embedding is a lookup, not a matmul; tied or not, the lm_head is one
    tokens = B * T
    forward = tokens * (L * sum(2 * m * n for m, n in block_weights) + 2 * lm_head[0] * lm_head[1])
    attention = L * B * H * 2 * (2 * T * T * (C // H))  # q @ k^T and att @ v per head, full T x T
    return 3 * (forward + attention)


def attention_term() -> int:
    return 3 * L * B * H * 2 * (2 * T * T * (C // H))


def tiny_gpt(tie: bool) -> GPT:
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=V, block_size=T, n_layer=L, n_head=H, n_embd=C, tie_embeddings=tie))


def forward_backward(model: GPT):
    x = torch.randint(0, V, (B, T))
    return lambda: model(x).float().pow(2).mean().backward()


@pytest.mark.parametrize("tie", [False, True], ids=["untied", "tied"])
def test_gpt_closed_form_is_the_hand_count(tie):
    model = tiny_gpt(tie)
    assert flops_per_update(model, B) == hand_count()
    assert gpt_flops_per_token(model) * B * T == hand_count()


@pytest.mark.parametrize("tie", [False, True], ids=["untied", "tied"])
def test_flop_counter_agrees_with_the_closed_form(tie):
    """On CPU, SDPA runs a fused kernel that torch's FlopCounterMode has no formula for, so the
    counter sees every matmul but attention's; with the math backend, attention is plain bmm
    calls, which it counts, and the totals agree exactly."""
    model = tiny_gpt(tie)
    closed = flops_per_update(model, B)
    assert measure_flops(forward_backward(model)) == closed - attention_term()
    with sdpa_kernel(SDPBackend.MATH):
        assert measure_flops(forward_backward(model)) == closed


def test_flops_per_update_has_no_closed_form_for_other_models():
    assert flops_per_update(nn.Linear(4, 4), 8) is None


def test_measure_flops_of_a_linear_layer():
    layer, x = nn.Linear(8, 5), torch.randn(4, 8)
    forward = 2 * 8 * 5 * 4  # the bias add is elementwise, not counted
    assert measure_flops(lambda: layer(x)) == forward
    assert measure_flops(lambda: layer(x).sum().backward()) == 2 * forward  # + weight gradient
    x.requires_grad_(True)
    assert measure_flops(lambda: layer(x).sum().backward()) == 3 * forward  # + input gradient


def test_mfu_is_model_flops_over_peak_flops_in_the_step_time():
    assert mfu(3.12e12, 0.02, 312e12) == pytest.approx(0.5)
    assert mfu(1e12, 1.0, 4e12) == pytest.approx(0.25)


def test_override_wins_and_cpu_has_no_peak(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H100 PCIe")
    assert peak_flops(torch.device("cpu"), "bf16", None) is None
    assert peak_flops(torch.device("cpu"), "fp32", 1.5) == 1.5e12
    assert peak_flops(torch.device("cuda"), "bf16", 100.0) == 100e12
    assert peak_flops(torch.device("cuda"), "bf16", None) == 756.5e12


@pytest.mark.parametrize("name,precision,tflops", [
    ("NVIDIA H100 PCIe", "bf16", 756.5),  # not the generic H100 row that also matches
    ("NVIDIA H100 80GB HBM3", "bf16", 989.5),
    ("NVIDIA H100 NVL", "fp16", 835.5),
    ("NVIDIA H200", "bf16", 989.5),
    ("NVIDIA A100-SXM4-80GB", "bf16", 312.0),
    ("NVIDIA A10G", "bf16", 125.0),
    ("NVIDIA L4", "bf16", 121.0),  # "L4" is inside "L40S": whole words only
    ("NVIDIA L40S", "bf16", 362.05),
    ("Tesla V100-PCIE-32GB", "fp16", 112.0),
    ("Tesla V100-SXM2-16GB", "fp16", 125.0),
    ("NVIDIA B200", "bf16", 2250.0),
    ("NVIDIA GeForce RTX 4090", "fp16", 165.2),
])
def test_peak_lookup_by_device_name(name, precision, tflops):
    assert peak_for_name(name, precision, tf32=False) == pytest.approx(tflops * 1e12)


def test_fp32_takes_the_tf32_peak_only_when_tf32_is_allowed():
    assert peak_for_name("NVIDIA A100-SXM4-40GB", "fp32", tf32=False) == pytest.approx(19.5e12)
    assert peak_for_name("NVIDIA A100-SXM4-40GB", "fp32", tf32=True) == pytest.approx(156e12)
    assert peak_for_name("Tesla V100-SXM2-16GB", "fp32", tf32=True) == pytest.approx(15.7e12)  # no TF32 cores


def test_unknown_gpu_or_missing_precision_has_no_peak():
    assert peak_for_name("NVIDIA GeForce GTX 1080", "fp32", tf32=False) is None
    assert peak_for_name("Tesla V100-SXM2-16GB", "bf16", tf32=False) is None


def test_peak_tflops_accepts_null_and_a_number():
    """Bad values are in test_bad_input_catalogue.py."""
    validate_config(compose_cfg(["perf.peak_tflops=312"]))
    validate_config(compose_cfg(["perf.peak_tflops=null"]))



# ------------------------------------------------------------------ perf/mfu in a real run (a faked peak)
PEAK_TFLOPS = 0.001  # 1 GFLOP/s: any CPU run gets a finite MFU


def _logged(tmp_path, overrides: list[str]) -> tuple[list[dict], dict]:
    _, summary = train([*overrides, f"perf.peak_tflops={PEAK_TFLOPS}", "trainer.max_steps=12", "trainer.log_every=4",
                        "logger=tensorboard"], tmp_path)
    return [r for r in read_metrics(tmp_path) if r["kind"] == "train"], summary


def test_gpt_run_logs_mfu_from_the_closed_form(tmp_path):
    n_layer, n_embd, block, batch = 2, 32, 16, 8
    rows, summary = _logged(tmp_path, [f"model.n_layer={n_layer}", f"model.n_embd={n_embd}", "model.n_head=2",
                                       f"model.block_size={block}", f"batch_size={batch}"])
    vocab = load_checkpoint(step_checkpoints(tmp_path)[0])["model"]["lm_head.weight"].shape[0]  # the data's
    per_token = 6 * (n_layer * 12 * n_embd**2 + n_embd * vocab) + 12 * n_layer * n_embd * block  # by hand
    flops = per_token * block * batch
    assert rows
    for row in rows:
        assert row["perf/mfu"] == pytest.approx(flops / (row["perf/step_time_ms"] / 1000 * PEAK_TFLOPS * 1e12),
                                                rel=1e-6)
    assert summary["tokens_per_s"] > 0 and summary["mfu"] == pytest.approx(
        flops * summary["tokens_per_s"] / (batch * block) / (PEAK_TFLOPS * 1e12), rel=1e-6)
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    assert "~perf/mfu" in EventAccumulator(str(tmp_path / "tb")).Reload().Tags()["scalars"]


def test_other_models_log_mfu_from_their_counted_first_update(tmp_path):
    rows, summary = _logged(tmp_path, ["model=mlp", "data=synthetic", "model.width=16", "model.depth=2",
                                       "data.in_features=8", "data.num_classes=4", "batch_size=32"])
    # Linear layers 8->16, 16->16, 16->4: forward 2*B*in*out each, backward twice that except the
    # first layer, whose input needs no gradient
    dims = [(8, 16), (16, 16), (16, 4)]
    flops = sum(2 * 32 * i * o * (2 if k == 0 else 3) for k, (i, o) in enumerate(dims))
    for row in rows:
        assert row["perf/mfu"] == pytest.approx(flops / (row["perf/step_time_ms"] / 1000 * PEAK_TFLOPS * 1e12),
                                                rel=1e-6)
    assert summary["samples_per_s"] > 0 and summary["mfu"] > 0


def test_no_peak_no_mfu(tmp_path):
    _, summary = train(["model=mlp", "data=synthetic", "trainer.max_steps=4", "trainer.log_every=2"], tmp_path)
    rows = [r for r in read_metrics(tmp_path) if r["kind"] == "train"]
    assert rows and all("perf/mfu" not in r for r in rows)
    assert summary["mfu"] is None and summary["samples_per_s"] > 0
