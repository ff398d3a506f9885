"""A text corpus's keys, read once: the character and subword corpora (data=stdlib, data=text, and
data=hf with task=lm) share them, and so do the helpers that split, tokenize and cache them."""
from __future__ import annotations

from dataclasses import dataclass

from omegaconf import DictConfig

CHAR = "char"  # the harness's character vocabulary (chars.py), not a tokenizers one (bpe.py)
BPE = "bpe"


@dataclass(frozen=True)
class CorpusConfig:
    """Where the text is, how long a training window is, how it is split and tokenized. The
    ranges of block_size, val_fraction and test_fraction are checked with the keys every option
    shares; the tokenizer's by `bpe.validate_tokenizer`."""

    path: str  # the text's file or dataset, or "stdlib"; errors name it so
    block_size: int
    val_fraction: float
    test_fraction: float | None  # null or 0: no test split
    cache_dir: str | None  # null: $HARNESS_CACHE_DIR or ~/.cache/stable-harness
    tokenizer: str  # char | bpe | a tokenizer.json (data=hf: or a transformers folder)
    vocab_size: int | None  # tokenizer=bpe: the BPE's size

    @classmethod
    def read(cls, cfg: DictConfig, path: str) -> CorpusConfig:
        return cls(path=path, block_size=int(cfg.block_size), val_fraction=float(cfg.val_fraction),
                   test_fraction=cfg.get("test_fraction"), cache_dir=cfg.get("cache_dir"),
                   tokenizer=cfg.get("tokenizer", CHAR), vocab_size=cfg.get("vocab_size"))
