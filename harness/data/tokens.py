"""Pre-tokenized corpora in nanoGPT's layout: uint16 memmaps DIR/train.bin and DIR/val.bin."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from omegaconf import DictConfig

from harness.data.base import DataMeta, TokenWindows
from harness.errors import ConfigError


def _vocab_size(cfg: DictConfig) -> int | None:
    if cfg.get("vocab_size"):
        return int(cfg.vocab_size)
    meta = Path(cfg.dir) / "meta.json"
    return int(json.loads(meta.read_text())["vocab_size"]) if meta.is_file() else None


def validate_tokens(cfg: DictConfig) -> None:
    root = cfg.get("dir")
    for split in ("train.bin", "val.bin"):
        if not root or not (Path(root) / split).is_file():
            raise ConfigError("data.dir", root, f"a directory holding train.bin and val.bin (uint16); {split} is missing")
    if _vocab_size(cfg) is None:
        raise ConfigError("data.vocab_size", None, f"a positive integer, or {root}/meta.json with a vocab_size field")


def build_tokens(cfg: DictConfig):
    root = Path(cfg.dir)
    block = int(cfg.block_size)
    train = np.memmap(root / "train.bin", dtype=np.uint16, mode="r")
    val = np.memmap(root / "val.bin", dtype=np.uint16, mode="r")
    meta = DataMeta(task="lm", vocab_size=_vocab_size(cfg), block_size=block)
    return TokenWindows(train, block), TokenWindows(val, block), meta

