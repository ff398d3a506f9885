"""The `init` config group: re-initialise a built model's weights by a named scheme."""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

from omegaconf import DictConfig
from torch import nn

from harness.core.errors import ConfigError, one_line
from harness.core.typed_config import one_of, read_typed, setting
from harness.state.checkpoint import verified_checkpoint
from harness.state.rundir import CKPT_DIR

SCHEMES = ("default", "xavier", "kaiming", "normal", "scaled_residual", "checkpoint")
CHECKPOINT = "checkpoint"  # init=checkpoint: the weights of another run, for a new run of its own


@dataclass(frozen=True)
class InitConfig:
    name: str = setting("default", f"one of {list(SCHEMES)}", one_of(SCHEMES))
    std: float = setting(0.02, "a number > 0", lambda v: v > 0)
    path: str | None = setting(None, "null, or (init=checkpoint) a .pt checkpoint or a run dir (its best.pt)")


def validate_init_config(cfg: DictConfig) -> InitConfig:
    """With init=checkpoint, `init.path` is resolved to the checkpoint file (a run dir: its best.pt)."""
    settings = read_typed(cfg, InitConfig, "init")
    if settings.name != CHECKPOINT:
        return settings
    given = Path(str(settings.path)) if settings.path is not None else None
    found = given / CKPT_DIR / "best.pt" if given is not None and given.is_dir() else given
    if found is None or not found.is_file():
        raise ConfigError("init.path", settings.path, "a .pt checkpoint, or a run dir holding checkpoints/best.pt "
                                                      "(a sharded .dcp: export it with scripts/export_checkpoint.py)")
    return replace(settings, path=str(found))


def apply_init(model: nn.Module, settings: InitConfig) -> None:
    """`default` keeps the model's own init; the others overwrite every Linear, convolution and Embedding.

    kaiming's ReLU gain is for layers whose output a ReLU reads; the last layer built (the head)
    feeds the loss and gets xavier, so the first logits stay near chance instead of sqrt(2)x wider.

    Embeddings always get normal(std): Glorot/He formulas assume a matmul fan-in that a lookup
    table does not have. Biases start at zero. A weight tied to an embedding stays an embedding.
    """
    if settings.name == "default":
        return
    if settings.name == CHECKPOINT:
        load_weights(model, Path(str(settings.path)))
        return
    std = settings.std
    depth_scale = math.sqrt(2 * getattr(model, "n_layer", 1))
    embeddings = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
    layers = [m for m in model.modules()
              if isinstance(m, (nn.Linear, nn.modules.conv._ConvNd)) and id(m.weight) not in embeddings]
    output = layers[-1] if layers else None  # the last layer built: the head, which feeds the loss, not a ReLU
    for module in model.modules():
        if isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, std=std)
        elif isinstance(module, (nn.Linear, nn.modules.conv._ConvNd)) and id(module.weight) not in embeddings:
            if settings.name == "xavier" or (settings.name == "kaiming" and module is output):
                nn.init.xavier_uniform_(module.weight)
            elif settings.name == "kaiming":
                nn.init.kaiming_normal_(module.weight, nonlinearity="relu")
            else:
                residual = settings.name == "scaled_residual" and getattr(module, "is_residual_projection", False)
                nn.init.normal_(module.weight, std=std / depth_scale if residual else std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)


def load_weights(model: nn.Module, path: Path) -> None:
    """The model's weights from a harness checkpoint, verified as a resume's is; the optimizer, the
    schedule, the data position and the step start fresh: a new run from trained weights."""
    state, problem = verified_checkpoint(path)
    if state is None:
        raise ConfigError("init.path", str(path), f"a checkpoint that can be trusted: it is {problem}")
    try:
        model.load_state_dict(state["model"])
    except (RuntimeError, KeyError) as err:
        raise ConfigError("init.path", str(path), f"a checkpoint of this model: loading its weights raised "
                                                  f"{one_line(err)}") from None
