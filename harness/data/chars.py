"""Character-level corpora: the Python standard library's sources (offline default) or any text file."""
from __future__ import annotations

import os
import sysconfig
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import numpy as np
from omegaconf import DictConfig

from harness.data.base import SPLITS, DataMeta, Splits, Tokens, token_splits
from harness.data.holdout import cut_tail, test_size
from harness.data.id_cache import cached_ids
from harness.data.token_file import TokenFile
from harness.data.bpe import fingerprint, short_hash, tokenize_corpus, validate_tokenizer
from harness.data.corpus import CHAR, CorpusConfig
from harness.core.errors import ConfigError

BINARY_SNIFF = 8192  # bytes read to tell a binary file from text
MAX_UNDECODABLE = 0.01  # fraction of characters that may fail to decode as UTF-8
EXCLUDED_DIRS = {"test", "tests", "idle_test", "site-packages", "__pycache__"}
Text = TypeVar("Text", np.ndarray, TokenFile, str)


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def stdlib_files() -> list[Path]:
    """The stdlib's own .py files in a fixed order, test suites left out (they are mostly fixtures)."""
    found = []
    for folder, subdirs, files in os.walk(stdlib_root()):
        subdirs[:] = [d for d in subdirs if d not in EXCLUDED_DIRS]  # prune: never walk site-packages
        found.extend(Path(folder) / f for f in files if f.endswith(".py"))
    return sorted(found)


def encode_chars(text: str) -> tuple[np.ndarray, list[str]]:
    """Map each character to its rank among the distinct characters (sorted by code point)."""
    codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    vocab, ids = np.unique(codes, return_inverse=True)
    if len(vocab) > np.iinfo(np.uint16).max:
        raise ValueError(f"{len(vocab)} distinct characters do not fit uint16 ids")
    return ids.astype(np.uint16), [chr(c) for c in vocab]


def split(ids: Text, val_fraction: float) -> tuple[Text, Text]:
    """The tail is validation: contiguous, so no window straddles both sides. Text for subword
    tokens is cut by characters before tokenizing, at the same place as the character ids."""
    return cut_tail(ids, int(len(ids) * val_fraction))


def held_out(ids: Text, cfg: CorpusConfig) -> tuple[Text, ...]:
    """(train, val), or (train, val, test) with data.test_fraction: validation is the same tail as
    without one, and the test split is the end of what it leaves."""
    rest, val = split(ids, cfg.val_fraction)
    train, test = cut_tail(rest, test_size(cfg.test_fraction, len(ids), len(val), cfg.block_size + 2, "characters"))
    return (train, val, test) if len(test) else (train, val)


def cache_root(cfg: CorpusConfig) -> Path:
    explicit = cfg.cache_dir or os.environ.get("HARNESS_CACHE_DIR")
    return Path(explicit or Path.home() / ".cache" / "stable-harness").expanduser()


def stdlib_fingerprint(files: list[Path]) -> str:
    """Names this Python install's corpus without reading it: file paths and sizes."""
    return short_hash("\n".join(f"{p}:{p.stat().st_size}" for p in files).encode())


def stdlib_text(files: list[Path]) -> str:
    return "".join(p.read_text(encoding="utf-8", errors="replace") for p in files)


def _char_corpus(folder: Path, read: Callable[[], str]) -> tuple[TokenFile, list[str]]:
    """Character ids of a text, encoded once into `folder` and read from there on later starts."""
    def build():
        ids, vocab = encode_chars(read())
        return {"ids": ids}, {"vocab": vocab, "vocab_size": len(vocab)}

    (ids,), facts = cached_ids(folder, ["ids"], build)
    return ids, facts["vocab"]


def _lm_data(parts: tuple[Tokens, ...], vocab_size: int, cfg: CorpusConfig, tokenizer_file: str | None = None) -> Splits:
    streams = dict(zip(SPLITS, parts))
    check_long_enough("data.path", cfg.path, streams, cfg.block_size)
    meta = DataMeta(task="lm", vocab_size=vocab_size, block_size=cfg.block_size, tokenizer_file=tokenizer_file)
    return token_splits(streams, meta)


def _char_data(ids: Tokens, vocab: list[str], cfg: CorpusConfig) -> Splits:
    return _lm_data(held_out(ids, cfg), len(vocab), cfg)


def subword_data(cfg: CorpusConfig, corpus: str, read: Callable[[], tuple[str, ...]]) -> Splits:
    """Windows of subword tokens (data.tokenizer=bpe or a tokenizer.json); `corpus` fingerprints the
    text and its split, and `read` returns (train, val[, test]) text only when the cache must be built."""
    tokens = tokenize_corpus(cfg, cache_root(cfg), corpus, read)
    return _lm_data(tuple(tokens.streams.values()), tokens.vocab_size, cfg, str(tokens.tokenizer_file))


def build_stdlib(cfg: CorpusConfig) -> Splits:
    files = stdlib_files()
    if cfg.tokenizer != CHAR:
        return subword_data(cfg, f"stdlib-{stdlib_fingerprint(files)}",
                            lambda: held_out(stdlib_text(files), cfg))
    ids, vocab = _char_corpus(cache_root(cfg) / f"stdlib-{stdlib_fingerprint(files)}", lambda: stdlib_text(files))
    return _char_data(ids, vocab, cfg)


def validate_stdlib(cfg: DictConfig) -> CorpusConfig:
    if not (stdlib_root() / "os.py").is_file():
        raise ConfigError("data", "stdlib", "a Python install with its standard-library sources")
    corpus = CorpusConfig.read(cfg, "stdlib")
    validate_tokenizer(corpus)
    return corpus


def _read_text(path: str) -> str:
    text = Path(path).read_text(encoding="utf-8", errors="replace")
    if text.count("\ufffd") > MAX_UNDECODABLE * max(len(text), 1):
        raise ConfigError("data.path", path, "a UTF-8 text file: over 1% of it is not UTF-8")
    return text


def build_text(cfg: CorpusConfig) -> Splits:
    stat = Path(cfg.path).stat()  # an edited file gets a new mtime, hence a new cache
    name = fingerprint(Path(cfg.path).resolve(), stat.st_size, stat.st_mtime_ns)
    if cfg.tokenizer != CHAR:
        return subword_data(cfg, f"text-{name}", lambda: held_out(_read_text(cfg.path), cfg))
    ids, vocab = _char_corpus(cache_root(cfg) / f"text-chars-{name}", lambda: _read_text(cfg.path))
    return _char_data(ids, vocab, cfg)


def validate_text(cfg: DictConfig) -> CorpusConfig:
    path = cfg.get("path")
    if not path or not Path(path).is_file():
        raise ConfigError("data.path", path, "an existing text file")
    with open(path, "rb") as f:
        if b"\0" in f.read(BINARY_SNIFF):
            raise ConfigError("data.path", path, "a UTF-8 text file: it holds NUL bytes (a binary file?)")
    corpus = CorpusConfig.read(cfg, str(path))
    validate_tokenizer(corpus)
    return corpus


def check_long_enough(key: str, value: object, streams: dict[str, np.ndarray], block: int) -> None:
    """Each split must hold at least one window of block_size+1 tokens."""
    for split_name, stream in streams.items():
        if len(stream) <= block + 1:
            raise ConfigError(key, value, f"a corpus whose {split_name} split has more than block_size+1 = "
                                          f"{block + 1} tokens; it has {len(stream)}")

