"""Remedies that depend on the run's own config: the overrides a rule's fix names, computed from
the values this run used (a 3x lower LR is a number, not advice), with where to restart.

The rules attach them to their findings (`Finding.remedies`, the likeliest cause first);
`diagnose.remedy=auto` tries them in that order and keeps what measurably helps. Each one changes
only what its finding blames, and the config's own cause comes first: a run that sums its
micro-batch gradients is told to average them, not to lower its LR. Each has a kind (a lower LR,
a clip, an init, ...) that a run tries once: a second LR cut is not a new idea.
"""
from __future__ import annotations

from harness.core.callables import locate
from harness.core.errors import ConfigError
from harness.diagnosis.findings import Remedy, Restart
from harness.diagnosis.load import RunData

LR_FACTOR = 3.0  # the seeds' advice: "lower the LR 3-10x"; 3x for a loss that drifted up or a run too slow,
BLOWUP_LR_FACTOR = 10.0  # 10x for a loss that went NaN or exploded, and for units that one huge update killed
WARMUP_FRACTION = 0.05  # of trainer.max_steps, for a run that has none
SAFE_CLIP = 1.0
RECURRENT_CLIP = 0.5  # backpropagation through time multiplies the gradient once per step
CLIP_RAISE = 10.0
HEALTHY_UPDATE_RATIO = 1e-3  # update/weight norm ratio of a run at a working LR
MAX_SLOW_FACTOR = 10.0
HEAVY_MOMENTUM = 0.95  # SGD momentum from which the overshoot is the momentum's: the optimizer switch comes first
LR_KINDS = ("lr_down", "lr_up")
ADAMW_LR = 1e-3  # AdamW's usual LR (the adamw option's default), for an SGD run switched to it
# torch's defaults for its adaptive optimizers. Their step moves each weight by about the LR whatever
# the gradient's size, so the default is a scale that holds across models, unlike SGD's.
ADAPTIVE_LR = {"Adam": 1e-3, "AdamW": 1e-3, "NAdam": 2e-3, "RAdam": 1e-3, "Adamax": 2e-3, "RMSprop": 1e-2,
               "Adagrad": 1e-2}
USUAL_BAND = 10.0  # an adaptive LR more than this factor from its usual one is outside the optimizer's range
SLOW_START = ("; the run starts over: its slow steps bought little, and a restart from a checkpoint would leave "
              "the faster updates only the steps that were left")


Candidates = tuple[Remedy, ...]


def calmer_updates(run: RunData, before_step: int | None = None, exploded: bool = False) -> Candidates:
    """diverging, oscillating: average the accumulated gradients when the config sums them; else
    a 3x lower LR (10x after an explosion), with a warmup and clipping when the run had none; then
    AdamW for an SGD run (first when heavy momentum is what overshoots)."""
    if run.summed_micro_batches:
        return (averaged_gradients(run, before_step),)
    candidates = []
    factor = 1 / (BLOWUP_LR_FACTOR if exploded else LR_FACTOR)
    lr = _lr_override(run, factor)
    if lr is not None:
        overrides = [lr]
        if run.warmup == 0:
            overrides.append(f"schedule.warmup={WARMUP_FRACTION}")
        if not run.cfg("clip"):
            overrides.append(f"clip={SAFE_CLIP}")
        candidates.append(Remedy(tuple(overrides), Restart.CHECKPOINT, "smaller updates stay inside the region where "
                                 "the loss still falls; a warmup and a clip bound the first and the largest of them"
                                 + _usual_note(run, factor), before_step, kind="lr_down"))
    switch = adaptive_optimizer(run)
    if switch is not None:
        heavy_momentum = (run.cfg("optim.momentum") or 0) >= HEAVY_MOMENTUM
        candidates.insert(0 if heavy_momentum else len(candidates), switch)
    return tuple(candidates)


def adaptive_optimizer(run: RunData) -> Remedy | None:
    """An SGD run that is unstable or stalled: AdamW at its usual LR, from scratch (SGD's momentum
    buffers mean nothing to AdamW). Adam scales each weight's step by its own gradient history, so
    one LR suits layers whose gradients differ by orders of magnitude, and a tiny gradient still
    moves its weight by about the LR. The switch changes the update rule, not the regularisation:
    a run without weight decay stays without it, rather than taking the adamw option's 0.1, which
    holds a small net's weights down (a run with decay takes AdamW's usual, decoupled one: its
    SGD value, scaled by an LR that is itself the problem, says nothing about AdamW's)."""
    if not str(run.cfg("optim._target_", "")).endswith("SGD"):
        return None
    undecayed = ("optim.weight_decay=0",) if not run.cfg("optim.weight_decay") else ()
    return Remedy(("optim=adamw", f"optim.lr={_number(ADAMW_LR)}", *undecayed), Restart.SCRATCH, "AdamW normalises "
                  "every weight's step by its gradient's running size: no direction overshoots the way SGD's momentum "
                  "does at a shared LR, and no weight stalls because its gradient is tiny; the optimizer changes, "
                  "so the run starts over", kind="optimizer")


def standardised_inputs(run: RunData) -> Candidates:
    """unnormalised_inputs that hurt: each input feature standardised with the training split's own
    statistics (`data.standardize`), from scratch. It comes before any LR change a symptom beside
    it offers: a lower LR only slows a first layer whose pre-activations are 100x too large."""
    if run.cfg("data.standardize"):
        return ()
    return (Remedy(("data.standardize=true",), Restart.SCRATCH, "inputs centred and scaled to unit variance keep the "
                   "first layer's pre-activations near 1, where the init, the activations and the LR were designed to "
                   "work; the inputs change, so the run starts over", kind="inputs"),)


def standardised_targets(run: RunData, inputs_too: bool) -> Candidates:
    """unscaled_targets that hurt: each regression target standardised with the training split's own
    statistics (`data.standardize_targets`), from scratch; the losses stay in the targets' units.
    With unscaled inputs beside them, both at once, as a regression's preprocessing scales X and y:
    either alone leaves the other's huge gradients, and one change that cannot help alone is not kept."""
    if run.cfg("data.standardize_targets"):
        return ()
    both = inputs_too and not run.cfg("data.standardize")
    return (Remedy(("data.standardize_targets=true", *(("data.standardize=true",) if both else ())), Restart.SCRATCH,
                   "targets in standard units are what a freshly initialised output layer already produces; the "
                   "model's outputs are mapped back, so every loss stays in the targets' own units"
                   + ("; the inputs, far from standard units too, are scaled with them" if both else "")
                   + "; the data changes, so the run starts over", kind="targets"),)


def bound_gradients(run: RunData, recurrent: bool, before_step: int | None = None) -> Candidates:
    """exploding_gradients: clip the global norm (tighter for recurrent models); then a lower LR; each
    from the last checkpoint before the first burst (`before_step`), where the bursts began."""
    clip = RECURRENT_CLIP if recurrent else SAFE_CLIP
    candidates = [Remedy((f"clip={clip}",), Restart.CHECKPOINT, "a clip bounds every update whatever the gradient "
                         "does; the rest of the updates are unchanged", before_step, kind="clip")]
    lr = _lr_override(run, 1 / LR_FACTOR)
    if lr is not None:
        candidates.append(Remedy((lr,), Restart.CHECKPOINT, "smaller steps keep the weights out of the region whose "
                                 "gradients burst", before_step, kind="lr_down"))
    return tuple(candidates)


def unpin_clip(run: RunData, clip: float, typical_high: float) -> Candidates:
    """clip_pinned: average the accumulated gradients when the config sums them; else raise the
    clip to the 90th percentile of the pre-clip norm (`typical_high`), at least 10x and at least
    1.0 (a pinned run's norms are an untrained model's), from scratch (a pinned clip slowed the run
    from its first step, like too low an LR)."""
    if run.summed_micro_batches:
        return (averaged_gradients(run),)
    return (Remedy((f"clip={_number(max(typical_high, clip * CLIP_RAISE, SAFE_CLIP), 2)}",), Restart.SCRATCH,
                   "at the 90th percentile of the gradient norm (and no lower than the usual 1.0) a clip catches "
                   "only the spikes, so ordinary updates get their full size back" + SLOW_START, kind="clip_raise"),)


def wider_range(run: RunData, scaling_is_on: bool) -> Candidates:
    """fp16 underflow: loss scaling, the config's own cause. fp16 overflow despite scaling: bf16
    (fp32's exponent range) where the device computes in it."""
    if not scaling_is_on:
        return (Remedy(("precision.loss_scaling=true",), Restart.CHECKPOINT, "GradScaler multiplies the loss so "
                       "that small gradients stay representable in fp16", kind="precision"),)
    if bf16_runs_here(run):
        return (Remedy(("precision=bf16",), Restart.CHECKPOINT, "bf16 has fp32's exponent range: nothing overflows "
                       "to Inf, and no loss scale is needed", kind="precision"),)
    return ()


def faster_updates(run: RunData, update_ratio: float | None = None) -> Candidates:
    """slow_progress: a higher LR, from scratch: by how far the median update/weight ratio at the
    peak LR (`update_ratio`) falls short of a healthy ~1e-3 (updates scale with the LR), between
    3x and 10x (the seeds' "raise it 3-10x"); 10x when it was 0 (no weight moved at all), 3x when
    it was not measured. An SGD run also gets AdamW: first when the shortfall is more than the
    largest raise closes (the gradient itself is tiny, as on a saturated plateau, and SGD's step
    scales with it while AdamW's does not), else after the raise."""
    factor = LR_FACTOR
    if update_ratio == 0:  # measured, and nothing moved: the weights' updates fell below their precision
        factor = MAX_SLOW_FACTOR
    elif update_ratio is not None:
        factor = min(max(HEALTHY_UPDATE_RATIO / update_ratio, LR_FACTOR), MAX_SLOW_FACTOR)
    lr = _lr_override(run, factor)
    candidates = [] if lr is None else [Remedy((lr,), Restart.SCRATCH, f"the weights barely move at this LR; "
                                               f"{factor:.3g}x larger updates are still far from where the loss "
                                               "diverges" + _usual_note(run, factor) + SLOW_START, kind="lr_up")]
    switch = adaptive_optimizer(run)
    if switch is not None:
        beyond_a_raise = update_ratio == 0 or (update_ratio is not None
                                               and HEALTHY_UPDATE_RATIO / update_ratio > MAX_SLOW_FACTOR)
        candidates.insert(0 if beyond_a_raise else len(candidates), switch)
    return tuple(candidates)


def lr_step(lr: float, factor: float, kind: str, midpoint: bool, restart: Restart) -> Remedy:
    """One step of the LR search that follows a kept LR move (`diagnose.remedy=auto`): `lr` times
    `factor`, from the restart point of the move it continues, which it is judged against."""
    why = ("the step before it overshot: the geometric midpoint between that LR and the last one that helped"
           if midpoint else f"the LR move before it measurably helped, so the LR is the cause: "
                            f"{max(factor, 1 / factor):.3g}x {'lower' if factor < 1 else 'higher'} once more")
    return Remedy((f"optim.lr={_number(lr * factor)}",), restart, why, kind=kind)


def revive_units(run: RunData, dead_from_the_start: bool) -> Candidates:
    """dead_relu, from scratch (dead units do not come back): units dead from the first collection
    on point at the init, so a ReLU-aware init comes first, then leaky units, then a 10x lower
    clipped LR; units that died during training point at a huge update, so the LR comes first."""
    candidates = []
    lr = _lr_override(run, 1 / BLOWUP_LR_FACTOR)
    if lr is not None:
        candidates.append(Remedy((lr,) if run.cfg("clip") else (lr, f"clip={SAFE_CLIP}"), Restart.SCRATCH,
                                 "a dead unit gets no gradient and never recovers, so the run starts over; 10x "
                                 "smaller, clipped updates no longer push pre-activations negative for good",
                                 kind="lr_down"))
    model_side = [r for r in (_reinit(run, "kaiming"), _swap(run, "leaky_relu")) if r is not None]
    return tuple(model_side + candidates if dead_from_the_start else candidates + model_side[::-1])


SATURATING = ("sigmoid", "tanh")
SATURATING_MODULES = ("Sigmoid", "Tanh", "Hardtanh")
BUILT_IN_MODELS = "harness.models."  # the _target_ prefix of the models whose keys these remedies know
RESNET = "harness.models.resnet.ResNet"


def clear_gradient_path(run: RunData) -> Candidates:
    """vanishing_gradients, from scratch, the likeliest cause first. A built-in model by its own
    keys: a post-LN transformer gets pre-LN (with a warmup), a saturating activation GELU, a plain
    deep stack residual connections. Any model, a user's too: its sigmoid/tanh modules swapped for
    GELU, then an init scaled for its depth (xavier under saturating units, kaiming under ReLUs)."""
    why = "; the architecture changes, so the run starts over"
    candidates = []
    if str(run.cfg("model._target_", "")).startswith(BUILT_IN_MODELS):
        if run.cfg("model.ln_position") == "post":
            warmup = (f"schedule.warmup={WARMUP_FRACTION}",) if run.warmup == 0 else ()
            candidates.append(Remedy(("model.ln_position=pre", *warmup), Restart.SCRATCH, "pre-LN keeps an identity "
                                     "path through every block, so early layers get the gradient the last ones get"
                                     + why, kind="architecture", changes_model=True))
        if run.cfg("model.activation") in SATURATING:
            candidates.append(Remedy(("model.activation=gelu",), Restart.SCRATCH, f"{run.cfg('model.activation')} "
                                     "passes on at most a quarter (sigmoid) of the gradient per layer; GELU passes on "
                                     "about all of it where it is active" + why, kind="activation", changes_model=True))
        if run.cfg("model.residual") is False:
            plain_cnn = run.cfg("model._target_") == RESNET and run.cfg("model.norm") == "none"
            candidates.append(Remedy(("model.residual=true", *(("model.norm=batch",) if plain_cnn else ())),
                                     Restart.SCRATCH, "residual connections give the gradient a path around every block"
                                     + (", and batch norm keeps each block's signal at a trainable scale"
                                        if plain_cnn else "") + why, kind="architecture", changes_model=True))
    elif any(m in SATURATING_MODULES for m in run.summary.get("modules") or []):
        candidates.append(_swap(run, "gelu"))
    saturating = run.cfg("model.activation") in SATURATING or any(
        m in SATURATING_MODULES for m in run.summary.get("modules") or [])
    candidates.append(_reinit(run, "xavier" if saturating else "kaiming"))
    return tuple(r for r in candidates if r is not None)


def _reinit(run: RunData, scheme: str, reason: str | None = None) -> Remedy | None:
    """Re-initialise every Linear/conv/embedding of the model (the `init` group works on any model)."""
    if run.cfg("init.name") == scheme:
        return None
    why = reason or {"kaiming": "He init keeps a ReLU stack's activations at the same scale through every layer, so no unit "
                      "starts below zero for every input",
           "xavier": "Glorot init keeps a saturating stack's pre-activations in the range where tanh and sigmoid "
                     "still have a slope"}[scheme]
    return Remedy((f"init={scheme}",), Restart.SCRATCH, why + "; the weights are drawn again, so the run starts over",
                  kind="init", changes_model=True)


def _swap(run: RunData, target: str, reason: str | None = None) -> Remedy | None:
    """Swap the model's hidden activation modules (`activation_swap`, any model) unless already done."""
    if run.cfg("activation_swap") is not None:
        return None
    why = reason or {"leaky_relu": "a leaky ReLU keeps a small slope below zero, so a unit pushed negative still gets a "
                         "gradient and can come back",
           "gelu": "GELU passes on about all of the gradient where it is active, where a sigmoid passes on at most "
                   "a quarter per layer"}[target]
    return Remedy((f"activation_swap={target}",), Restart.SCRATCH, why + "; the model's activation modules change "
                  "(the output's own stays), so the run starts over", kind="activation", changes_model=True)


def bounded_forward(run: RunData, hidden_activation: bool) -> Candidates:
    """forward_overflow: the activation that overflowed swapped for a standard one, then smaller
    pre-activations from the init, and only then smaller updates (the LR cannot shrink an input)."""
    found = [_swap(run, "gelu", "GELU grows at most linearly with its input, where an exponential overflows float32 "
                   "past about 88") if hidden_activation else None,
             _reinit(run, "xavier", "Glorot init keeps each layer's pre-activations near unit scale, far from where "
                     "the activation overflows"),
             *calmer_updates(run, None, exploded=True)]
    return tuple(r for r in found if r is not None)


OUTPUT_WHY = {"identity": "a linear output reaches every target and hands the loss raw logits",
              "sigmoid": "a sigmoid is the probability of one class, between 0 and 1 and never constant",
              "softmax": "a softmax gives every class a probability, and they sum to 1"}


def output_fix(run: RunData, target: str, constant: bool = False) -> Candidates:
    """output_activation: the activation after the model's last layer with weights replaced
    (`output_activation`, any model), from scratch: what the model predicts changes. A `constant`
    output trains nothing under any objective, so its replacement is offered under the user's own."""
    if run.cfg("output_activation") is not None:
        return ()
    return (Remedy((f"output_activation={target}",), Restart.SCRATCH, OUTPUT_WHY[target] + "; the model's output "
                   "changes, so the run starts over", kind="output", changes_model=True, any_objective=constant),)


def bf16_runs_here(run: RunData) -> bool:
    """Whether the run's device computes in bf16: every CPU does; CUDA from Ampere on; not MPS."""
    import torch

    device = str(run.cfg("device", "auto"))
    if device.startswith("cuda") or (device == "auto" and torch.cuda.is_available()):
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    return not device.startswith("mps")


def averaged_gradients(run: RunData, before_step: int | None = None) -> Remedy:
    """The config's own cause of oversized updates, first: average the micro-batch gradients."""
    accum = run.summed_micro_batches
    return Remedy(("accum_reduction=mean",), Restart.CHECKPOINT, f"accum_reduction=sum adds up {accum} micro-batch "
                  f"gradients instead of averaging them, so every update is {accum}x too large; the mean is the "
                  "gradient the LR was chosen for", before_step, kind="accum")


def _lr_override(run: RunData, factor: float) -> str | None:
    lr = _run_lr(run)
    return None if lr is None else f"optim.lr={_number(moved_lr(lr, factor, usual_lr(run)))}"


def _run_lr(run: RunData) -> float | None:
    lr = run.cfg("optim.lr")
    return float(lr) if isinstance(lr, (int, float)) and not isinstance(lr, bool) else None


def moved_lr(lr: float, factor: float, usual: float | None) -> float:
    """`lr` times `factor`; for an adaptive optimizer (`usual`: its usual LR) whose LR the move would
    still leave more than USUAL_BAND x beyond its usual one, on the side it started from, the edge
    of that range: Adam at lr 100 moves every weight by ~100 a step, and 10x rungs from there take
    six attempts to reach where it trains. The edge, not the usual LR itself: a short run at 100x
    its usual LR may train best at 10x, and the LR search goes on from there when it helps."""
    moved = lr * factor
    if usual is not None and factor < 1 and moved > usual * USUAL_BAND:
        return usual * USUAL_BAND
    if usual is not None and factor > 1 and moved < usual / USUAL_BAND:
        return usual / USUAL_BAND
    return moved


def _usual_note(run: RunData, factor: float) -> str:
    """The why of an LR move that lands at the edge of the optimizer's range (see `moved_lr`), else ""."""
    lr, usual = _run_lr(run), usual_lr(run)
    if lr is None or usual is None or (moved := moved_lr(lr, factor, usual)) == lr * factor:
        return ""
    return (f"; {run.cfg('optim._target_')} moves each weight by about the LR per step, so lr {_number(lr)} is "
            f"{max(lr / usual, usual / lr):.3g}x from its usual {_number(usual)}: the move goes at once to "
            f"{_number(moved)}, {USUAL_BAND:g}x from it")


def usual_lr(run: RunData) -> float | None:
    """The usual LR of the run's optimizer when it is one of torch's adaptive ones or a subclass of
    one (ADAPTIVE_LR); None for SGD and anything else. A class that cannot be imported here (a
    run diagnosed away from its code) is known by its name alone."""
    target = str(run.cfg("optim._target_", ""))
    try:
        bases = [(base.__module__, base.__name__) for base in getattr(locate("optim._target_", target), "__mro__", ())]
    except ConfigError:
        bases = [("torch.optim", target.rpartition(".")[2])]
    return next((ADAPTIVE_LR[n] for m, n in bases if m.startswith("torch.optim") and n in ADAPTIVE_LR), None)


def _number(value: float, digits: int = 3) -> str:
    """`value` rounded, written so that YAML and Hydra both read a float (2.0e+03, not 2e+03)."""
    text = f"{value:.{digits}g}"
    mantissa, e, exponent = text.partition("e")
    return f"{mantissa}.0e{exponent}" if e and "." not in mantissa else text
