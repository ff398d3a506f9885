"""Pre-tokenized corpora in nanoGPT's layout: uint16 memmaps DIR/train.bin and DIR/val.bin (and DIR/test.bin,
scored by mode=eval only, when present)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig

from harness.data.base import SPLITS, DataMeta, Splits, token_splits
from harness.data.chars import check_long_enough
from harness.data.token_file import TokenFile
from harness.core.errors import ConfigError
from harness.core.validation import is_whole


def _vocab_size(cfg: DictConfig) -> int | None:
    if cfg.get("vocab_size") is not None:
        return cfg.vocab_size
    meta = Path(cfg.dir) / "meta.json"
    if not meta.is_file():
        return None
    try:
        value = json.loads(meta.read_text())["vocab_size"]
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as err:
        raise ConfigError("data.dir", cfg.dir, f"a meta.json holding {{\"vocab_size\": N}}: reading it raised "
                                               f"{type(err).__name__}") from None
    return value


@dataclass(frozen=True)
class TokensConfig:
    """`data=tokens`, checked: the directory, the vocabulary size (given, or its meta.json's) and
    the window length (block_size is checked with the keys every option shares)."""

    dir: str  # as given: errors name it so
    vocab_size: int
    block_size: int


def validate_tokens(cfg: DictConfig) -> TokensConfig:
    root = cfg.get("dir")
    optional = ["test.bin"] if root and (Path(root) / "test.bin").is_file() else []
    for split in ("train.bin", "val.bin", *optional):
        if not root or not (Path(root) / split).is_file():
            raise ConfigError("data.dir", root, f"a directory holding train.bin and val.bin (uint16); {split} is missing")
        size = (Path(root) / split).stat().st_size
        if size == 0 or size % 2:
            raise ConfigError("data.dir", root, f"uint16 token files: {split} has {size} bytes, not a positive "
                                                f"whole number of 2-byte ids")
    vocab = _vocab_size(cfg)
    if vocab is not None and (not is_whole(vocab) or not 1 <= vocab <= 2**16):
        raise ConfigError("data.vocab_size", vocab, "an integer in [1, 65536] (ids are uint16)")
    if vocab is None:
        raise ConfigError("data.vocab_size", None, f"a positive integer, or {root}/meta.json with a vocab_size field")
    return TokensConfig(str(root), int(vocab), int(cfg.block_size))


def build_tokens(cfg: TokensConfig) -> Splits:
    root = Path(cfg.dir)
    streams = {name: TokenFile(root / f"{name}.bin") for name in SPLITS if (root / f"{name}.bin").is_file()}
    check_long_enough("data.dir", cfg.dir, streams, cfg.block_size)
    return token_splits(streams, DataMeta(task="lm", vocab_size=cfg.vocab_size, block_size=cfg.block_size))
