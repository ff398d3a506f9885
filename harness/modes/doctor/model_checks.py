"""Checks on the untrained model: its first loss, where its gradient reaches, and whether it can learn at all."""
from __future__ import annotations

import torch

from harness.data.batch import batch_size
from harness.data.loader import FixedBatches
from harness.config.doctor import DoctorConfig
from harness.modes.doctor.data_checks import num_classes
from harness.modes.doctor.result import Outcome, Status
from harness.modes.doctor.sampling import batches, sample_indices
from harness.modes.lr_find.driver import driven
from harness.assembly.assemble import Assembly

# Logits drawn i.i.d. N(0, s^2) cost ln K + s^2/2 nats on average. Above ln K + 1 the untrained
# model is confidently wrong (logit std > 1.4) and its first updates only undo the init.
INITIAL_LOSS_EXCESS = 1.0
# An untrained model cannot know the labels; far below ln K its inputs give them away. A tied
# GPT sits a little below ln K (it echoes its input token), well within this margin.
INITIAL_LOSS_DEFICIT = 1.0
INITIAL_LOSS_SAMPLES = 64  # enough to pin the mean loss to ~0.01 nats
# "Near zero", relative to where the batch started: 5% of the initial loss leaves a memorised
# batch (0.27 nats of ln 222 = 5.4 for characters) yet no model that only learned the label prior.
OVERFIT_RATIO = 0.05
# A user's objective may not reach zero on any batch; a fall to half its start still shows learning.
OPEN_FLOOR_SHARE = 0.5
OVERFIT_CHECK_EVERY = 10  # updates between clean measurements of the batch loss
NAMES_SHOWN = 8  # keeps the table readable; the rest are counted


@torch.no_grad()
def clean_loss(built: Assembly, indices: torch.Tensor) -> float:
    """Mean loss without dropout, label smoothing or z-loss: the number to compare with ln K and 0."""
    model = built.raw_model
    model.eval()
    total, count, objective = 0.0, 0.0, built.clean_objective
    for x, y in batches(built, indices):
        with built.precision.autocast():
            scored = objective.score(model, x, y)
        n = float(scored.count) if scored.count is not None else batch_size(x)
        total += scored.loss.item() * (1.0 if scored.count is not None else n)
        count += n
    model.train()
    return total / max(count, 1.0)


def check_initial_loss(built: Assembly) -> Outcome:
    loss = clean_loss(built, sample_indices(built.train_set, INITIAL_LOSS_SAMPLES))
    chance = built.meta.chance_loss
    if built.meta.user_loss is not None:
        return Outcome(Status.SKIP, f"{built.meta.user_loss}: initial loss {loss:.4g} (this objective's best "
                                    f"constant is unknown: no ln K reference)")
    if chance is None:
        return Outcome(Status.SKIP, f"regression (no ln K reference); initial "
                                    f"{(built.meta.loss_function or 'mse').upper()} {loss:.4g}")
    measured = f"{loss:.3f} vs ln({num_classes(built.meta)}) = {chance:.3f} ({loss - chance:+.3f})"
    if loss > chance + INITIAL_LOSS_EXCESS:
        return Outcome(Status.FAIL, measured,
                       "the untrained model is confidently wrong: scale down the output layer's init "
                       "(init=normal init.std=0.02, or zero the head), and make sure the loss gets logits, "
                       "not probabilities")
    if loss < chance - INITIAL_LOSS_DEFICIT:
        return Outcome(Status.WARN, measured,
                       "the untrained model already beats chance by a wide margin: check that the targets "
                       "cannot be read off the inputs (e.g. language-model targets not shifted by one)")
    return Outcome(Status.PASS, measured)


def check_gradient_flow(built: Assembly) -> Outcome:
    """One backward pass in float32: every trainable parameter must get a finite, non-zero gradient."""
    model = built.raw_model
    model.zero_grad(set_to_none=True)
    x, y = next(batches(built, sample_indices(built.train_set, built.micro_batch)))
    built.objective.score(model, x, y).loss.backward()
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    missing = [n for n, p in named if p.grad is None]
    zero = [n for n, p in named if p.grad is not None and not p.grad.any()]
    nonfinite = [n for n, p in named if p.grad is not None and not torch.isfinite(p.grad).all()]
    model.zero_grad(set_to_none=True)
    if nonfinite:
        return Outcome(Status.FAIL, f"non-finite gradient in {_names(nonfinite)}",
                       "the forward pass overflows or divides by zero for these: look for exp/log/sqrt/division "
                       "without an epsilon, or inputs with NaN")
    if missing or zero:
        parts = [f"{kind} gradient: {_names(names)}" for kind, names in (("no", missing), ("zero", zero)) if names]
        return Outcome(Status.FAIL, f"{len(missing) + len(zero)} of {len(named)} tensors; " + "; ".join(parts),
                       "these never train: use them in forward or delete them; look for .detach(), "
                       "torch.no_grad(), an integer cast or a dead branch on their path; "
                       "set requires_grad=False if they are frozen on purpose")
    return Outcome(Status.PASS, f"all {len(named)} parameter tensors")


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:NAMES_SHOWN])
    return shown + (f" (+{len(names) - NAMES_SHOWN} more)" if len(names) > NAMES_SHOWN else "")


def check_overfit(built: Assembly, settings: DoctorConfig) -> Outcome:
    """The real training step, at the configured peak LR, memorises a tiny batch; the run is restored after."""
    indices = sample_indices(built.train_set, settings.overfit_samples)
    initial = clean_loss(built, indices)
    target = OVERFIT_RATIO * initial
    loss, steps = initial, 0
    fixed = FixedBatches(built.train_set, built.recipe, indices, built.dist.rank, built.dist.world_size,
                         built.config.run.accum)
    with driven(built, fixed) as driver:
        while steps < settings.overfit_steps and loss > target:
            driver.step(driver.reference_lr)
            steps += 1
            if steps % OVERFIT_CHECK_EVERY == 0 or steps == settings.overfit_steps:
                loss = clean_loss(built, indices)
    measured = f"{initial:.3f} -> {loss:.3g} in {steps} updates (target <= {target:.3g})"
    if loss <= target:
        return Outcome(Status.PASS, measured)
    if built.meta.user_loss is not None and loss <= OPEN_FLOOR_SHARE * initial:
        return Outcome(Status.WARN, measured, "it memorises, but this objective's floor is unknown (a KL term, "
                                              "sampling noise or a temperature can hold it above zero): judge the "
                                              "fall yourself, or raise doctor.overfit_steps")
    return Outcome(Status.FAIL, measured,
                   "a working model memorises a few samples: if the loss barely moved, check the LR "
                   "(mode=lr_find), frozen or disconnected layers and the input/label pairing; if it fell "
                   "but too slowly, raise doctor.overfit_steps or reduce regularisation (weight decay, dropout)")
