"""Token ids built once per corpus and tokenizer, then read from files on every later start.

Tokenizing is the slow part of building a language corpus (seconds per 10 MB of characters,
minutes for a large dataset through a transformers tokenizer); reading cached ids costs nothing
up front, since a TokenFile reads only the windows a run asks for. A cache folder is written
under a temporary name and renamed into place, so concurrent builders (sweep trials, ranks)
never read half of one.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from harness.data.bpe import staged_dir
from harness.data.token_file import TokenFile

META_FILE = "meta.json"
Built = tuple[dict[str, np.ndarray], dict[str, Any]]  # (id streams by name, facts to keep beside them)


def id_dtype(vocab_size: int) -> np.dtype:
    """uint16 (nanoGPT's layout) when every id fits, else uint32."""
    return np.dtype(np.uint16 if vocab_size <= 2**16 else np.uint32)


def cached_ids(folder: Path, names: Sequence[str], build: Callable[[], Built]) -> tuple[list[TokenFile], dict]:
    """The streams `names` of `folder` (NAME.bin) and its meta.json facts; `build` makes them
    (ids, facts) only when the folder does not exist yet. facts["vocab_size"] picks the id width."""
    if not (folder / META_FILE).exists():
        streams, facts = build()
        dtype = id_dtype(int(facts.get("vocab_size", 0)))
        with staged_dir(folder) as staging:
            for name in names:
                streams[name].astype(dtype).tofile(staging / f"{name}.bin")
            (staging / META_FILE).write_text(json.dumps({**facts, "dtype": dtype.name}))
    facts = json.loads((folder / META_FILE).read_text())
    dtype = np.dtype(facts.get("dtype", "uint16"))  # caches of earlier versions hold uint16
    return [TokenFile(folder / f"{name}.bin", dtype) for name in names], facts
