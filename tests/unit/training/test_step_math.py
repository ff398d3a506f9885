"""The training step's arithmetic: clipping, fp16 unscaling, gradient accumulation."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from conftest import compose_cfg
from harness.training.clipping import clip_gradients, global_grad_norm
from harness.assembly.assemble import assemble
from harness.config.run_config import validate_config

VECTOR = ["model=mlp", "data=synthetic", "model.width=32", "model.dropout=0.0", "logger=none"]


def _grads(seed: int = 0) -> list[nn.Parameter]:
    torch.manual_seed(seed)
    params = [nn.Parameter(torch.randn(5, 7)), nn.Parameter(torch.randn(7)), nn.Parameter(torch.randn(3, 3, 2))]
    for p in params:
        p.grad = torch.randn_like(p) * 10
    return params


@pytest.mark.parametrize("max_norm", [0.5, 1.0, 1e6])
def test_norm_clipping_equals_clip_grad_norm(max_norm):
    ours, ref = _grads(), _grads()
    norm = global_grad_norm(ours)
    clip_gradients(ours, "norm", max_norm, norm)
    ref_norm = nn.utils.clip_grad_norm_(ref, max_norm)
    assert torch.equal(norm, ref_norm)
    for a, b in zip(ours, ref):
        assert torch.equal(a.grad, b.grad)


def test_value_layer_and_adaptive_clipping_bound_what_they_promise():
    params = _grads()
    clip_gradients(params, "value", 0.3, global_grad_norm(params))
    assert max(p.grad.abs().max().item() for p in params) <= 0.3 + 1e-6
    params = _grads()
    clip_gradients(params, "layer", 0.7, global_grad_norm(params))
    assert all(p.grad.norm().item() <= 0.7 + 1e-5 for p in params)
    params = _grads()
    clip_gradients(params, "adaptive", 0.01, global_grad_norm(params))
    w = params[0].detach()
    assert torch.all(params[0].grad.norm(dim=1) <= 0.01 * w.norm(dim=1) * (1 + 1e-5))


def _run(overrides, tmp_path):
    cfg = compose_cfg(VECTOR + ["trainer.max_steps=20", "trainer.log_every=1", "schedule.warmup=2", *overrides])
    return assemble(validate_config(cfg), tmp_path, torch.device("cpu"), resume_from=None)


def test_fp16_clipping_sees_unscaled_gradients(tmp_path, monkeypatch):
    """With a 2^16 loss scale the norm handed to clipping must match fp32's, not be 65536x larger."""
    import harness.loop.step

    real_clip = harness.loop.step.clip_gradients
    seen: dict[str, list[float]] = {}

    def spy(params, mode, clip, total_norm):
        norms.append(total_norm.item())
        real_clip(params, mode, clip, total_norm)
        norms.append(global_grad_norm(params).item())

    monkeypatch.setattr(harness.loop.step, "clip_gradients", spy)
    for precision in ("fp32", "fp16"):
        norms = seen[precision] = []
        _run([f"precision={precision}", "clip=0.01"], tmp_path / precision).trainer.update()
    (pre32, post32), (pre16, post16) = seen["fp32"], seen["fp16"]
    assert pre16 == pytest.approx(pre32, rel=2e-2)  # fp16 rounding, not the loss scale
    assert pre32 > 0.01
    assert post32 == pytest.approx(0.01, rel=1e-3) and post16 == pytest.approx(0.01, rel=1e-3)


def test_accumulation_matches_one_big_batch(tmp_path):
    """accum=4 x 16 == accum=1 x 64 after 20 updates; the scheduler moved 20 times, not 80."""
    params, schedulers = {}, {}
    for accum in (1, 4):
        built = _run(["batch_size=64", f"accum={accum}", "optim=adamw", "clip=1.0"], tmp_path / str(accum))
        trainer = built.trainer
        torch.set_num_threads(1)
        for _ in range(20):
            trainer.update()
        params[accum] = [p.detach().clone() for p in built.raw_model.parameters()]
        schedulers[accum] = built.live_lr.scheduler.last_epoch
    diff = max((a - b).abs().max().item() for a, b in zip(params[1], params[4]))
    assert diff <= 1e-5
    assert schedulers[4] == schedulers[1] == 20


def test_partial_tail_batch_is_a_weighted_mean(tmp_path):
    """An epoch tail smaller than the batch still averages over its samples."""
    built = _run(["batch_size=64", "accum=4", "data.n_train=100"], tmp_path)
    trainer = built.trainer
    trainer.batches.stream.next_batch()  # 64 samples; 36 remain in the epoch
    from harness.data.sampler import split_for_rank

    tail = trainer.batches.stream.next_batch()
    micro = split_for_rank(tail, 0, 1, 4)
    assert len(tail) == 36 and sum(len(m.indices) for m in micro) == 36
    from harness.data.loader import fetch
    from harness.data.targets import target_shares

    shares = target_shares([fetch(built.train_set, built.recipe, m.indices)[1] for m in micro], -100)
    assert shares == pytest.approx([len(m.indices) / 36 for m in micro]) and sum(shares) == pytest.approx(1.0)
    assert trainer.batches.stream.epoch == 1 and trainer.batches.stream.offset == 0
