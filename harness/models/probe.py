"""One forward pass on one micro-batch before training: a model whose output does not fit the
task fails in milliseconds with one line, not after minutes with a shape error in the loss."""
from __future__ import annotations

import logging
from collections.abc import Mapping

import torch
from torch import nn

from harness.data import DataMeta
from harness.data.batch import describe_batch, tensors
from harness.core.errors import ConfigError, one_line
from harness.models.output import AUTO, OutputPicker

log = logging.getLogger("harness")


def expected_output(meta: DataMeta, x: torch.Tensor, y: torch.Tensor) -> str:
    if meta.task == "lm":
        return f"float logits [{', '.join(map(str, x.shape[:2]))}, {meta.vocab_size}] (batch, time, vocab_size)"
    if meta.task == "classification":
        return f"float logits [{x.shape[0]}, {meta.out_features}] (batch, num_classes)"
    return f"float predictions with {y.numel()} elements, shaped like the targets {list(y.shape)}"


def _fits(out: torch.Tensor, meta: DataMeta, x: torch.Tensor, y: torch.Tensor) -> bool:
    if not out.is_floating_point():
        return False
    if meta.task == "lm":  # a vocabulary padded past the data's (e.g. to a multiple of 64) is fine
        return out.dim() == 3 and out.shape[:2] == x.shape[:2] and out.shape[2] >= meta.vocab_size
    if meta.task == "classification":
        return out.dim() == 2 and tuple(out.shape) == (x.shape[0], meta.out_features)
    return out.numel() == y.numel()


def has_batch_norm(model: nn.Module) -> bool:
    return any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules())


def check_batch_norm(model: nn.Module, micro_batch: int, batch_size: int) -> None:
    """Batch norm cannot normalise a batch of one sample in training (torch raises mid-run)."""
    if micro_batch < 2 and has_batch_norm(model):
        raise ConfigError("batch_size", batch_size, f"at least 2 samples per micro-batch for a model with batch norm "
                                                    f"(batch_size / (accum x world size) = {micro_batch})")


def behaves_differently_in_eval(model: nn.Module) -> bool:
    """Batch norm (running statistics) or dropout: eval mode computes another function than training."""
    return any(isinstance(m, nn.modules.batchnorm._BatchNorm) and m.track_running_stats
               or isinstance(m, nn.modules.dropout._DropoutNd) and m.p > 0 for m in model.modules())


@torch.no_grad()
def probe_model(model: nn.Module, picker: OutputPicker, meta: DataMeta, x: torch.Tensor, y: torch.Tensor,
                path: str) -> None:
    """Run the model once in eval mode (no dropout draws, no batch-norm statistics updated) and
    check its output against the task; the RNG streams are left exactly as they were."""
    name = path.rsplit(".", 1)[-1]
    devices = [x.device] if x.device.type == "cuda" else []
    was_training = model.training
    model.eval()
    try:
        with torch.random.fork_rng(devices=devices):
            try:
                raw = model(x)
            except Exception as err:  # noqa: BLE001 - the user's forward
                raise ConfigError("model._target_", path, f"a model whose forward runs on a batch of inputs "
                                  f"{describe_batch(x)}: {name}.forward raised {one_line(err)}"
                                  ).in_user_code(err) from None
    finally:
        model.train(was_training)
    if picker.key != AUTO and isinstance(raw, torch.Tensor):
        raise ConfigError("model_output", picker.key, f"auto: {name} returns a plain tensor, which has no fields")
    try:
        out = picker(raw)
    except ValueError as err:
        raise ConfigError("model_output", picker.key, f"a field of {name}'s output that holds the logits: {err}") from None
    if not isinstance(out, torch.Tensor) or not _fits(out, meta, x, y):
        raise ConfigError("model._target_", path, f"a model whose output fits the {meta.task} task: {name} returned "
                          f"{describe_batch(out)} for inputs {describe_batch(x)}; expected "
                          f"{expected_output(meta, x, y)}")
    unread = unread_outputs(raw, picker.pick(raw))
    if unread:
        log.info("%s's output also holds %s; the loss reads only the logits (to train on them too, name your "
                 "objective: loss._target_=mypkg.objective, docs/bring-your-own.md)", name, ", ".join(unread))


def unread_outputs(raw: object, picked: torch.Tensor) -> list[str]:
    """The tensors of a model's output besides the one the loss reads: a dict's or ModelOutput's
    other fields, a tuple's other items (a VAE's mu and logvar, an MoE's router loss)."""
    if isinstance(raw, Mapping):
        named = [(str(k), v) for k, v in raw.items()]
    elif isinstance(raw, (tuple, list)):
        fields = getattr(raw, "_fields", None)  # a namedtuple names its items
        named = [(fields[i] if fields else f"item {i}", v) for i, v in enumerate(raw)]
    else:
        return []
    return [name for name, value in named if isinstance(value, torch.Tensor) and value is not picked]


def parameter_counts(model: nn.Module) -> dict[str, object]:
    """Trainable and frozen parameter counts, and the modules whose parameters are all frozen
    (outermost first): a fine-tuning recipe applied by mistake shows up here, not in any curve."""
    frozen = sum(p.numel() for p in model.parameters() if not p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    modules: list[str] = []
    for name, module in model.named_modules():
        params = list(module.parameters())
        if name and params and not any(p.requires_grad for p in params) \
                and not any(name.startswith(f"{outer}.") for outer in modules):
            modules.append(name)
    return {"trainable": total - frozen, "frozen": frozen, "frozen_modules": modules}


OUTPUT_ROWS = 512  # eval samples whose logits are measured: enough for any K up to a few hundred
DIRECTION_SHARE = 0.1  # a direction counts when its singular value is >= 10% of the largest


def output_directions(logits: torch.Tensor) -> dict[str, object] | None:
    """How many independent directions a classifier's logits span over the eval samples
    (singular values of the centred [N, K] logits at >= 10% of the largest), with the leading
    relative singular values. A layer narrower than the classes (a 2-unit bottleneck before 20
    classes, a hidden width of 2) caps it, however long the run: a working classifier's logits
    span most of their K-1 directions. None when the output does not vary at all, or is not
    finite (a diverged model has no shape to measure)."""
    raw = logits.detach().double().cpu()
    if not torch.isfinite(raw).all():
        return None
    values = torch.linalg.svdvals(raw - raw.mean(0))
    if not len(values) or values[0] <= 1e-9 * max(float(raw.abs().max()), 1.0):
        return None
    relative = (values / values[0]).tolist()
    return {"directions": sum(v >= DIRECTION_SHARE for v in relative), "classes": int(logits.shape[-1]),
            "samples": int(logits.shape[0]), "spectrum": [round(v, 3) for v in relative[:8]]}


MIN_EMBEDDING_DIM = 4  # narrower outputs (a binary classifier's logits) have no rank to lose


def embedding_rows(output: object) -> torch.Tensor | None:
    """The first [batch, dim] floating-point tensor of a model's output (its embeddings, or its
    prediction), when dim is wide enough to measure a rank."""
    for t in tensors(output):
        if t.is_floating_point() and t.dim() == 2 and t.shape[1] >= MIN_EMBEDDING_DIM:
            return t
    return None


def input_wide(rows: torch.Tensor, batch: object) -> bool:
    """Whether output rows are as wide as a floating-point input's samples: an autoencoder's or a
    VAE's reconstructions can be (a projector can be too; the objective's parts tell them apart)."""
    return any(t.is_floating_point() and t.dim() >= 2 and len(t) == len(rows) and t[0].numel() == rows.shape[1]
               for t in tensors(batch))


def effective_rank(rows: torch.Tensor) -> float | None:
    """exp of the entropy of the normalised singular values of [N, D] rows (RankMe, Garrido et al.
    2023): D for rows that fill every direction evenly, 1 when they all lie on one line (a collapsed
    representation). None for rows that are all zero or not finite."""
    raw = rows.detach().double().cpu()
    if not torch.isfinite(raw).all():
        return None
    values = torch.linalg.svdvals(raw)
    if not len(values) or values.sum() <= 0:
        return None
    p = values / values.sum()
    return float(torch.exp(-(p * torch.log(p + 1e-12)).sum()))
