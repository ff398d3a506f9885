"""Rules about what only the user's own objective shows (loss._target_): a VAE whose posterior
collapsed onto its prior, a contrastive or self-supervised model whose embeddings collapsed onto
a line, a multi-part objective whose update follows one part while another stands still. They
read the objective's logged parts, the eval rows' effective rank and the parts' gradient shares;
without them (built-in losses) they stay silent."""
from __future__ import annotations

import re

import numpy as np

from harness.core.metric_names import GRAD_SHARE, TRAIN_LOSS_PART, VAL_EFFECTIVE_RANK, VAL_LOSS_PART
from harness.diagnosis.findings import Finding, Severity
from harness.diagnosis.load import RunData
from harness.diagnosis.signals import EDGE_POINTS, MIN_EVALS, end_level, fmt, start_level

# Posterior collapse (Bowman et al. 2016; Lucas et al. 2019): the KL part ends near 0 nats per
# sample and stayed there through the second half of the run, while the other part (the
# reconstruction) stopped improving. A latent unit in use costs about a nat or more; a collapsed
# posterior, which copies the prior, costs ~0.
KL_PART = re.compile(r"(^|[^a-z])kl")
KL_FLOOR = 0.05  # nats per sample
RECON_STILL_FALLING = 0.05  # relative fall over the second half that counts as still improving

# Representation collapse: the output embeddings' effective rank (RankMe) ended below COLLAPSED_RANK
# and below half of its peak, the untrained model's included (a collapse can be over before the
# first eval): every sample maps near one line, whatever the input.
COLLAPSED_RANK = 2.5
RANK_FALL = 0.5

# A drowned part: over the second half, one part's share of the loss's gradient (grad_share/*,
# measured on the monitor's steps) has a median of at least 95%, while another part that has a
# gradient of its own did not improve: it fell less than 10% from where it started, or rose. The
# shared weights follow the first; the second stays where the untrained model had it, or is pushed
# up by what the first makes of the shared weights.
DROWNING_SHARE = 0.95
DROWNED_FALL = 0.10


def _named_parts(run: RunData) -> list[str]:
    names = {k[len(VAL_LOSS_PART):] for row in run.evals for k in row if k.startswith(VAL_LOSS_PART)}
    return sorted(names)


def posterior_collapse(run: RunData) -> Finding | None:
    parts = _named_parts(run)
    kl_names = [p for p in parts if KL_PART.search(p.lower())]
    others = [p for p in parts if p not in kl_names and p != "prior"]
    if not kl_names or not others:
        return None
    kl = run.series(VAL_LOSS_PART + kl_names[0], "eval").finite()
    if len(kl) < MIN_EVALS:
        return None
    second_half = kl.after_fraction(0.5)
    if not (second_half.values <= KL_FLOOR).all():
        return None
    recon_name = max(others, key=lambda p: abs(run.evals[-1].get(VAL_LOSS_PART + p, 0.0)))
    recon = run.series(VAL_LOSS_PART + recon_name, "eval").finite().after_fraction(0.5)
    if len(recon) < 2:
        return None
    fall = (recon.values[0] - recon.values[-1]) / max(abs(recon.values[0]), 1e-12)
    if fall > RECON_STILL_FALLING:
        return None
    below = int(kl.steps[np.argmax(kl.values <= KL_FLOOR)])
    return Finding(
        "posterior_collapse", Severity.WARNING, "the posterior collapsed onto the prior: the latent carries nothing",
        f"the KL part `{kl_names[0]}` fell to {fmt(float(kl.values[-1]))} nats (at most {KL_FLOOR} from step {below} "
        f"on, where a latent unit in use costs about a nat), while `{recon_name}` stopped improving (it fell "
        f"{fall:.1%} over the second half, to {fmt(float(recon.values[-1]))}): the decoder reconstructs without the "
        f"latent, and the encoder matches the prior exactly.",
        "warm the KL term up (its weight from 0 to its value over the first 10-30% of the run), or give it free bits "
        "(a floor of about 0.1-0.5 nats per latent unit below which it costs nothing); lower its weight (beta); or "
        "weaken the decoder (fewer layers, a narrower input) so that it needs the latent.")


def representation_collapse(run: RunData) -> Finding | None:
    rank = run.series(VAL_EFFECTIVE_RANK, "eval").finite()
    if len(rank) < MIN_EVALS:
        return None
    initial = run.summary.get("initial_effective_rank")
    peak, end = max(float(rank.values.max()), initial or 0.0), float(rank.values[-1])
    if end >= COLLAPSED_RANK or end >= RANK_FALL * peak:
        return None
    if run.summary.get("rank_rows_input_wide") and any(KL_PART.search(p.lower()) or "recon" in p.lower()
                                                        for p in _named_parts(run)):
        return _collapsed_reconstructions(run, rank, peak, end, initial)
    return Finding(
        "representation_collapse", Severity.WARNING, "the embeddings collapsed: every input maps near one direction",
        f"the effective rank of the model's output embeddings over the eval samples (exp of their singular values' "
        f"entropy) fell from {fmt(peak)} at its peak (the untrained model's: {fmt(initial) if initial else 'unknown'}) "
        f"to {fmt(end)} at step {int(rank.steps[-1])}; 1 means every "
        f"embedding lies on one line, whatever the input.",
        "an objective with nothing that pushes embeddings apart collapses: give it negatives (InfoNCE) or a variance "
        "term (VICReg), or a stop-gradient with a predictor (BYOL, SimSiam); lower the temperature (0.1-0.2); "
        "add a projector head and measure the representation before it; train on larger batches (more negatives).")


def _collapsed_reconstructions(run: RunData, rank, peak: float, end: float, initial: float | None) -> Finding:
    """The rows are the model's reconstructions of its inputs (as wide as the inputs, under an
    objective with a reconstruction or KL part: an autoencoder, a VAE): every input
    decodes to nearly the same output, the mean of the data, which is a decoder that ignores its
    code, not embeddings without negatives."""
    return Finding(
        "representation_collapse", Severity.WARNING, "the reconstructions collapsed: every input decodes to "
                                                     "nearly the same output",
        f"the effective rank of the model's reconstructions over the eval samples fell from {fmt(peak)} at its peak "
        f"(the untrained model's: {fmt(initial) if initial else 'unknown'}) to {fmt(end)} at step "
        f"{int(rank.steps[-1])}; 1 means every reconstruction lies on one line, whatever the input: the decoder "
        "outputs about the data's mean.",
        "the decoder ignores its code: check that the code reaches it with its gradient (no detach on the way) and "
        "that the reconstruction term reads the input it should reconstruct; for a VAE, a KL term that dominates "
        "empties the latent (warm its weight up over the first 10-30% of the run, free bits, a lower beta).")


def drowned_part(run: RunData) -> Finding | None:
    keys = run.keys(GRAD_SHARE)
    if len(keys) < 2:
        return None
    medians = {}
    for key in keys:
        late = run.series(key).finite().after_fraction(0.5)
        if len(late):
            medians[key[len(GRAD_SHARE):]] = float(np.median(late.values))
    if not medians:
        return None
    dominant = max(medians, key=lambda name: medians[name])
    if medians[dominant] < DROWNING_SHARE:
        return None
    for name in sorted((n for n in medians if n != dominant), key=lambda n: medians[n]):
        part = run.series(TRAIN_LOSS_PART + name).finite()
        if len(part) < 2 * EDGE_POINTS:
            continue
        start, end = start_level(part), end_level(part)
        if start > 0 and (start - end) / start < DROWNED_FALL:
            return Finding(
                "drowned_part", Severity.WARNING, f"the part `{name}` is drowned by `{dominant}`",
                f"over the second half `{dominant}` made {medians[dominant]:.1%} of the loss's gradient (median of "
                f"the monitor's steps) and `{name}` {medians[name]:.2%}; `{name}` went from {fmt(start)} to "
                f"{fmt(end)} ({(start - end) / start:+.1%} of its start): the shared weights follow `{dominant}` "
                "alone.",
                f"raise `{name}`'s weight in your objective (by about the ratio of the shares, then tune it), or "
                f"scale each part by its own size (divide by a running mean of it, or learn the weights: uncertainty "
                f"weighting, GradNorm); an adaptive optimizer (AdamW) lets `{name}`'s own head learn, but not the "
                "weights the parts share.")
    return None
