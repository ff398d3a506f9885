"""Subword tokens for the text data options: `data.tokenizer=bpe` or a `tokenizer.json` file.

`bpe` trains a byte-level BPE (GPT-2's scheme) of `data.vocab_size` tokens with Hugging Face
`tokenizers`, on the training split only, so validation text never shapes the vocabulary. A path
names a tokenizers-format `tokenizer.json`, used as it is. Either way the tokenizer and the
encoded train/val ids (uint16, nanoGPT's layout) are cached in one folder, keyed by the corpus,
its split and the tokenizer: only the first run trains and encodes; later runs memory-map the ids.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from harness.core.errors import ConfigError, one_line
from harness.data.base import SPLITS
from harness.data.token_file import TokenFile
from harness.core.validation import is_whole
from harness.data.corpus import BPE, CHAR, CorpusConfig

log = logging.getLogger("harness")

BYTE_TOKENS = 256  # a byte-level BPE starts from every byte, so any text encodes
MIN_VOCAB = BYTE_TOKENS + 1  # at least one merge, or BPE is only a byte vocabulary
MAX_VOCAB = int(np.iinfo(np.uint16).max) + 1  # ids are stored as uint16
PIECE_CHARS = 1 << 16  # text is trained on and encoded in pieces about this long, in parallel
FINGERPRINT_CHARS = 16  # hex digits of sha256 in cache folder names
TOKENIZER_FILE = "tokenizer.json"
DONE_FILE = "meta.json"  # written last into a staged folder; the folder is published whole
# Just before the last character of a run of whitespace (a space or newline then a non-space):
# GPT-2's pre-tokenizer (`\s+(?!\S)|\s+`, ` ?\p{L}+`, ...) ends a pre-token there in the whole text
# too, so pieces cut there encode to exactly the whole text's ids. Anywhere else in a run, the
# lookahead `(?!\S)` would see the end of the piece instead of the text that follows.
PIECE_CUT = re.compile(r"(?=[ \n]\S)")


@dataclass(frozen=True)
class Tokenized:
    """A corpus's token ids by split (train, val and maybe test), and the tokenizer that maps them back to text."""

    streams: dict[str, TokenFile]
    vocab_size: int  # 1 + the largest id the tokenizer can emit: the model's output count
    tokenizer_file: Path


def short_hash(data: bytes) -> str:
    """The first FINGERPRINT_CHARS hex digits of sha256: a cache folder's name for what it holds."""
    return hashlib.sha256(data).hexdigest()[:FINGERPRINT_CHARS]


def fingerprint(*parts: object) -> str:
    """A short stable name for what the parts describe, for cache folder names."""
    return short_hash("\0".join(map(str, parts)).encode())


def publish_dir(staging: Path, target: Path) -> None:
    """Move a fully written cache folder into place: concurrent builders (sweep trials, ranks)
    never see half of one, and the loser of a race drops its identical copy."""
    try:
        os.replace(staging, target)  # atomic within one file system
    except OSError:  # another process won the race
        shutil.rmtree(staging)


@contextlib.contextmanager
def staged_dir(target: Path) -> Iterator[Path]:
    """A folder to write a cache into, published as `target` when the block ends; an interrupted
    build (Ctrl-C, a full disk) leaves no half-built folder behind."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}-"))
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging)
        raise
    publish_dir(staging, target)


def uses_tokenizers(tokenizer: object) -> bool:
    """True for `bpe` or a tokenizer.json file (not for `char`, nor for a transformers directory)."""
    return tokenizer == BPE or (isinstance(tokenizer, str) and tokenizer != CHAR and Path(tokenizer).is_file())


def validate_tokenizer(corpus: CorpusConfig, directories: bool = False) -> None:
    """`data.tokenizer` and, for bpe, `data.vocab_size`; looks at no file's contents (loading a
    tokenizer.json is the build's job). `directories`: data=hf also takes a transformers folder."""
    tokenizer = corpus.tokenizer
    if tokenizer == BPE:
        vocab = corpus.vocab_size
        if not is_whole(vocab) or not MIN_VOCAB <= vocab <= MAX_VOCAB:
            raise ConfigError("data.vocab_size", vocab, f"an integer in [{MIN_VOCAB}, {MAX_VOCAB}] for "
                                                        f"data.tokenizer=bpe: the {BYTE_TOKENS} bytes plus at "
                                                        f"least one merge, and ids stored as uint16")
    elif tokenizer != CHAR and not uses_tokenizers(tokenizer) and not (
            directories and isinstance(tokenizer, str) and Path(tokenizer).is_dir()):
        folder = ", or a local tokenizer folder (one saved by save_pretrained)" if directories else ""
        raise ConfigError("data.tokenizer", tokenizer, f"char (characters), bpe (a byte-level BPE trained on the "
                                                       f"train split) or an existing tokenizer.json file{folder}")


def pieces(text: str) -> Iterator[str]:
    """The text in pieces of about PIECE_CHARS, cut where the cut changes no token (PIECE_CUT)."""
    start = 0
    while start < len(text):
        cut = PIECE_CUT.search(text, start + PIECE_CHARS)
        end = cut.start() if cut else len(text)
        yield text[start:end]
        start = end


def train_bpe(text: str, vocab_size: int) -> Tokenizer:
    """Byte-level BPE: every byte is in the initial alphabet, so no text is ever unknown; a corpus
    with fewer distinct words than merges yields fewer than vocab_size tokens."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tokenizer.train_from_iterator(pieces(text), trainer=trainer)
    return tokenizer


def vocab_size_of(tokenizer: Tokenizer) -> int:
    """1 + the largest id, not the token count: a file's ids may have gaps, and every id needs an output."""
    return max(tokenizer.get_vocab(with_added_tokens=True).values(), default=-1) + 1


def load_tokenizer(path: str) -> Tokenizer:
    """A user's tokenizer.json, checked to fit uint16 ids and set to encode a corpus, not model inputs."""
    try:
        tokenizer = Tokenizer.from_file(path)
    except Exception as err:  # noqa: BLE001 - tokenizers raises a bare Exception for a malformed file
        raise ConfigError("data.tokenizer", path, f"a tokenizers-format tokenizer.json: loading it raised "
                                                  f"{one_line(err)}") from None
    if vocab_size_of(tokenizer) > MAX_VOCAB:
        raise ConfigError("data.tokenizer", path, f"a tokenizer with ids below {MAX_VOCAB} (they are stored as "
                                                  f"uint16); its vocabulary has {vocab_size_of(tokenizer)}")
    tokenizer.no_truncation()  # a file saved for a model's inputs may cut or pad every encoding
    tokenizer.no_padding()
    return tokenizer


def _pieces_are_exact(tokenizer: Tokenizer) -> bool:
    """PIECE_CUT is proven for GPT-2's pre-tokenizer alone (no normalizer, no prefix space added to
    every piece); any other tokenizer encodes the text whole, on one core."""
    pre = tokenizer.pre_tokenizer
    return (tokenizer.normalizer is None and isinstance(pre, pre_tokenizers.ByteLevel) and pre.use_regex
            and not pre.add_prefix_space)


def encode(tokenizer: Tokenizer, text: str) -> np.ndarray:
    """Token ids of the text, without special tokens (the stream is one document)."""
    parts = list(pieces(text)) if _pieces_are_exact(tokenizer) else [text]
    encodings = tokenizer.encode_batch_fast(parts, add_special_tokens=False)  # pieces on all cores
    return np.fromiter((i for e in encodings for i in e.ids), dtype=np.uint16)


def tokenize_corpus(cfg: CorpusConfig, cache_dir: Path, corpus: str, read: Callable[[], tuple[str, ...]]) -> Tokenized:
    """The corpus's (train, val[, test]) text as token ids, from the cache or built into it.

    `corpus` names the text without reading it (a fingerprint); `read` returns the split texts,
    and is called only when the cache lacks this corpus, split and tokenizer."""
    if cfg.tokenizer == BPE:
        spec = f"bpe{cfg.vocab_size}"
    else:
        spec = f"file-{short_hash(Path(cfg.tokenizer).read_bytes())}"
    held_out = float(cfg.test_fraction or 0)  # named only when set: the caches of earlier runs stay valid
    split_key = (float(cfg.val_fraction), *([held_out] if held_out else []))
    target = cache_dir / f"tokens-{fingerprint(corpus, *split_key, spec)}"
    if not (target / DONE_FILE).exists():
        _build(cfg, target, {"corpus": corpus, "val_fraction": float(cfg.val_fraction), "tokenizer": spec,
                             **({"test_fraction": held_out} if held_out else {})}, read)
    meta = json.loads((target / DONE_FILE).read_text())
    streams = {name: TokenFile(target / f"{name}.bin") for name in SPLITS if (target / f"{name}.bin").exists()}
    return Tokenized(streams, meta["vocab_size"], target / TOKENIZER_FILE)


def _build(cfg: CorpusConfig, target: Path, key: dict[str, object], read: Callable[[], tuple[str, ...]]) -> None:
    started = time.perf_counter()
    texts = dict(zip(SPLITS, read()))
    tokenizer = train_bpe(texts["train"], cfg.vocab_size) if cfg.tokenizer == BPE else load_tokenizer(cfg.tokenizer)
    trained = time.perf_counter()
    vocab_size, counts = vocab_size_of(tokenizer), {}
    with staged_dir(target) as staging:
        tokenizer.save(str(staging / TOKENIZER_FILE))
        for name, text in texts.items():
            ids = encode(tokenizer, text)
            ids.tofile(staging / f"{name}.bin")
            counts[name] = len(ids)
        (staging / DONE_FILE).write_text(json.dumps({**key, "vocab_size": vocab_size, "tokens": counts,
                                                     "chars": {name: len(text) for name, text in texts.items()}}))
    log.info("%s tokenizer (%d ids): %s in %.1fs, encoded %d chars into %d tokens in %.1fs; cached in %s",
             key["tokenizer"], vocab_size, "trained" if cfg.tokenizer == BPE else "loaded", trained - started,
             sum(len(t) for t in texts.values()), sum(counts.values()), time.perf_counter() - trained, target)
