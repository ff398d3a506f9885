"""`data=hf`: a local Hugging Face `datasets` dataset (the optional `hf` extra). Never downloads.

Loaded with `load_from_disk(path)` (a `save_to_disk` folder) or `load_dataset(format,
data_files=path)` for local text/json/csv/parquet files. Language modelling tokenizes a text
column (the harness's character vocabulary, a byte-level BPE trained on the train split, a
tokenizer.json file, or a local transformers tokenizer directory) into one token stream cut into
windows, as `data=text` does; classification and regression read feature and label columns.
`data.test_split` names a split that mode=eval scores; training never reads it.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from harness.data.base import TASKS, ArrayDataset, DataMeta, Splits, token_splits
from harness.data.bpe import fingerprint, short_hash, uses_tokenizers, validate_tokenizer
from harness.data.chars import cache_root, check_long_enough, encode_chars, split, subword_data
from harness.data.corpus import CorpusConfig
from harness.data.hf_text import is_tokenizer, text_classes
from harness.data.id_cache import Built, cached_ids
from harness.core.errors import ConfigError, one_line

FORMATS = ("text", "json", "csv", "parquet")
INSTALL = 'the hf extra: pip install -e ".[hf]"'
HASHED_BYTES = 50 * 2**20  # tokenizer files below this are fingerprinted by content


def _datasets() -> Any:
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")  # a local dataset must never turn into a download
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        import datasets
    except ImportError:
        raise ConfigError("data", "hf", INSTALL) from None
    datasets.disable_progress_bars()
    return datasets


@dataclass(frozen=True)
class HFConfig:
    """`data=hf`'s keys, checked (conf/data/hf.yaml says what each holds)."""

    path: str
    format: str | None
    train_split: str
    val_split: str | None
    test_split: str | None
    task: str
    val_fraction: float
    corpus: CorpusConfig | None  # task=lm: the text's keys (text_column, tokenizer, block_size, ...)
    text_column: str
    input_key: list[str]  # classification and regression: the feature column(s)
    target_key: str
    num_classes: int | None
    text_tokenizer: str | None = None  # classification of the text column: its tokenizer (hf_text.py)
    block_size: int = 64  # text classification: tokens per sample, cut or padded


def validate_hf(cfg: DictConfig) -> HFConfig:
    _datasets()
    fmt, path = cfg.get("format"), cfg.get("path")
    if fmt is not None and fmt not in FORMATS:
        raise ConfigError("data.format", fmt, f"null (a save_to_disk folder) or one of {list(FORMATS)}")
    if not isinstance(path, str) or not path:
        raise ConfigError("data.path", path, "a local dataset folder (save_to_disk) or data file")
    if fmt is None and not Path(path).is_dir():
        raise ConfigError("data.path", path, "a folder written by Dataset.save_to_disk (or set data.format "
                                             f"to one of {list(FORMATS)} for data files)")
    if fmt is not None and "*" not in path and not Path(path).exists():
        raise ConfigError("data.path", path, f"an existing {fmt} file, folder or glob pattern")
    if cfg.get("task") not in TASKS:
        raise ConfigError("data.task", cfg.get("task"), f"one of {list(TASKS)}")
    corpus = CorpusConfig.read(cfg, path) if cfg.task == "lm" else None
    if corpus is not None:
        validate_tokenizer(corpus, directories=True)
    inputs = cfg.get("input_key")
    text_classes = cfg.task == "classification" and inputs is None and is_tokenizer(cfg.get("tokenizer"))
    if cfg.task != "lm" and inputs is None and not text_classes:
        raise ConfigError("data.input_key", None, "the feature column (or a list of columns) to read inputs from; or, "
                                                  "to classify the text of data.text_column, data.tokenizer set to a "
                                                  "tokenizer.json file or a local tokenizer folder")
    inputs = OmegaConf.to_container(inputs) if OmegaConf.is_list(inputs) else inputs
    return HFConfig(path=path, format=fmt, train_split=cfg.get("train_split", "train"), val_split=cfg.get("val_split"),
                    test_split=cfg.get("test_split"), task=cfg.task, val_fraction=float(cfg.val_fraction),
                    corpus=corpus, text_column=cfg.get("text_column", "text"),
                    input_key=[inputs] if isinstance(inputs, str) else list(inputs or []),
                    target_key=cfg.get("target_key") or "label", num_classes=cfg.get("num_classes"),
                    text_tokenizer=cfg.tokenizer if text_classes else None, block_size=int(cfg.block_size))


def _load(cfg: HFConfig) -> Any:
    datasets = _datasets()
    try:
        if cfg.format is None:
            return datasets.load_from_disk(cfg.path)
        return datasets.load_dataset(cfg.format, data_files=cfg.path)
    except Exception as err:  # noqa: BLE001 - a corrupt or foreign folder, an unparsable file
        raise ConfigError("data.path", cfg.path, f"a readable dataset: loading raised {one_line(err)}") from None


def _split(loaded: Any, name: str | None, key: str) -> Any:
    """One split of a DatasetDict; a plain Dataset is its own train split."""
    if not hasattr(loaded, "keys"):
        if key != "data.train_split":
            held_out = " (val_fraction of it is held out)" if key == "data.val_split" else ""
            raise ConfigError(key, name, f"null: the dataset has a single split{held_out}")
        return loaded
    if name not in loaded:
        raise ConfigError(key, name, f"one of the dataset's splits {list(loaded.keys())}")
    return loaded[name]


def _column(dataset: Any, column: str, key: str) -> None:
    if column not in dataset.column_names:
        raise ConfigError(key, column, f"a column of the dataset: {dataset.column_names}")


def build_hf(cfg: HFConfig) -> Splits:
    loaded = _load(cfg)
    train = _split(loaded, cfg.train_split, "data.train_split")
    val, test = (_split(loaded, name, f"data.{key}") if name is not None else None
                 for key, name in (("val_split", cfg.val_split), ("test_split", cfg.test_split)))
    if cfg.corpus is not None:
        return _token_windows(cfg, cfg.corpus, train, val, test)
    if cfg.text_tokenizer is not None:
        return _text_splits(cfg, cfg.text_tokenizer, train, val, test)
    return _columns(cfg, train, val, test)


def _texts(dataset: Any, column: str) -> list[str]:
    _column(dataset, column, "data.text_column")
    return [t for t in dataset[column] if isinstance(t, str) and t]


def _token_windows(cfg: HFConfig, corpus: CorpusConfig, train: Any, val: Any, test: Any) -> Splits:
    """Documents joined into one stream (newline or the tokenizer's EOS between them); the val split,
    or the stream's tail when there is none, is validation."""
    texts = {"train": _texts(train, cfg.text_column)}
    for name, split_set in (("val", val), ("test", test)):
        if split_set is not None:
            texts[name] = _texts(split_set, cfg.text_column)
    if uses_tokenizers(corpus.tokenizer):
        return _subword_windows(corpus, texts)
    joined = {name: "\n".join(docs) for name, docs in texts.items()}
    if corpus.tokenizer == "char":
        build, spec = partial(_encode_chars, joined), "chars"
    else:
        build, spec = (partial(_tokenize, corpus.tokenizer, texts),
                       f"dir-{_directory_fingerprint(Path(corpus.tokenizer))}")
    folder = cache_root(corpus) / f"hf-{fingerprint(*joined.values(), spec)}"
    files, facts = cached_ids(folder, list(texts), build)  # tokenized once; later starts read the ids
    streams, vocab_size = dict(zip(texts, files)), facts["vocab_size"]
    if val is None:
        streams["train"], streams["val"] = split(streams["train"], corpus.val_fraction)
    block = corpus.block_size
    check_long_enough("data.path", cfg.path, streams, block)
    return token_splits(streams, DataMeta("lm", vocab_size=vocab_size, block_size=block))


def _subword_windows(cfg: CorpusConfig, texts: dict[str, list[str]]) -> Splits:
    """BPE or a tokenizer.json: without a val split, the tail is cut by characters before tokenizing
    (as data=text does), so the BPE never trains on validation text."""
    train = "\n".join(texts["train"])
    parts = (train, "\n".join(texts["val"])) if "val" in texts else split(train, cfg.val_fraction)
    if "test" in texts:
        parts = (*parts, "\n".join(texts["test"]))
    return subword_data(cfg, f"hf-{fingerprint(*parts)}", lambda: parts)  # the text itself names the corpus


def _encode_chars(joined: dict[str, str]) -> Built:
    """One character vocabulary over every split (each split's documents joined by newlines)."""
    ids, vocab = encode_chars("".join(joined.values()))
    ends = np.cumsum([len(t) for t in joined.values()])
    return dict(zip(joined, np.split(ids, ends[:-1]))), {"vocab_size": len(vocab)}


def _tokenize(directory: str, texts: dict[str, list[str]]) -> Built:
    try:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(directory, local_files_only=True)
    except Exception as err:  # noqa: BLE001 - missing extra, a folder without tokenizer files
        raise ConfigError("data.tokenizer", directory, f"a local tokenizer directory ({INSTALL}): "
                                                       f"loading raised {one_line(err)}") from None
    eos = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []
    streams = {}
    for name, docs in texts.items():
        ids = [i for doc in tokenizer(docs)["input_ids"] for i in [*doc, *eos]]
        streams[name] = np.asarray(ids, dtype=np.int64)
    return streams, {"vocab_size": len(tokenizer)}


def _directory_fingerprint(directory: Path) -> str:
    """Names a tokenizer folder by its files: contents of the small ones (vocabularies, merges,
    configs), size and mtime of large ones (weights saved beside the tokenizer)."""
    parts = []
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        stat = path.stat()
        parts += [path.relative_to(directory), short_hash(path.read_bytes()) if stat.st_size < HASHED_BYTES
                  else (stat.st_size, stat.st_mtime_ns)]
    return fingerprint(*parts)


class HFColumns(ArrayDataset):
    """Feature and label columns of a `datasets.Dataset`, gathered a batch at a time through Arrow."""

    def __init__(self, dataset: Any, inputs: list[str], target: str) -> None:
        self.dataset = dataset.with_format("torch", columns=[*inputs, target])
        self.inputs, self.target = inputs, target

    def __len__(self) -> int:
        return len(self.dataset)

    def gather(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        rows = self.dataset[idx.tolist()]
        if len(self.inputs) == 1:
            x = rows[self.inputs[0]]
        else:  # scalar feature columns side by side
            x = torch.stack([rows[c].float() for c in self.inputs], dim=-1)
        x = x.float() if x.dtype == torch.float64 else x
        y = rows[self.target]
        return x, (y.float() if y.dtype == torch.float64 else y)


def _held_out_val(cfg: HFConfig, train: Any, val: Any) -> tuple[Any, Any]:
    """(train, val): the val split, or val_fraction of train held out."""
    if val is not None:
        return train, val
    parts = train.train_test_split(test_size=cfg.val_fraction, seed=0, shuffle=True)
    return parts["train"], parts["test"]


def _num_classes(cfg: HFConfig, train: Any) -> int:
    classes = cfg.num_classes or getattr(train.features[cfg.target_key], "num_classes", None)
    if classes is None:
        raise ConfigError("data.num_classes", None, f"an integer: the {cfg.target_key!r} column is not a ClassLabel")
    return int(classes)


def _text_splits(cfg: HFConfig, tokenizer: str, train: Any, val: Any, test: Any) -> Splits:
    """Each split's texts tokenised into dict samples (hf_text.py)."""
    for split_set in (s for s in (train, val, test) if s is not None):
        _column(split_set, cfg.text_column, "data.text_column")
        _column(split_set, cfg.target_key, "data.target_key")
    train, val = _held_out_val(cfg, train, val)
    built, vocab = {}, 0
    for name, split_set in (("train", train), ("val", val), ("test", test)):
        if split_set is not None:
            built[name], vocab = text_classes(tokenizer, [str(t) for t in split_set[cfg.text_column]],
                                              list(split_set[cfg.target_key]), cfg.block_size)
    meta = DataMeta("classification", out_features=_num_classes(cfg, train), vocab_size=vocab,
                    block_size=cfg.block_size)
    return Splits(built["train"], built["val"], meta, built.get("test"))


def _columns(cfg: HFConfig, train: Any, val: Any, test: Any) -> Splits:
    inputs, target = cfg.input_key, cfg.target_key
    for split_set in (train, test) if test is not None else (train,):
        for column, key in [*((c, "data.input_key") for c in inputs), (target, "data.target_key")]:
            _column(split_set, column, key)
    train, val = _held_out_val(cfg, train, val)
    train_set, val_set = HFColumns(train, inputs, target), HFColumns(val, inputs, target)
    x, y = train_set.gather(torch.tensor([0]))
    if cfg.task == "classification":
        meta = DataMeta("classification", out_features=_num_classes(cfg, train), in_features=x[0].numel(),
                        input_shape=tuple(x[0].shape))
    else:
        meta = DataMeta("regression", out_features=max(y[0].numel(), 1), in_features=x[0].numel(),
                        input_shape=tuple(x[0].shape))
    return Splits(train_set, val_set, meta, HFColumns(test, inputs, target) if test is not None else None)
