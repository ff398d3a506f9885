"""Subword tokens for the text options (data.tokenizer=bpe or a tokenizer.json): trained on the train
split only, cached once, and written into the run dir so a checkpoint's ids can be decoded."""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer, pre_tokenizers

from conftest import TINY_GPT, compose_cfg, train
from harness.data import bpe, build_data, validate_data_config
from harness.data.chars import stdlib_files, stdlib_text
from harness.data.token_file import TokenFile
from harness.modes.run import run

VAL_ONLY = "zyxwvutsrq"  # a word that appears only in the corpus's validation tail
VOCAB = 300
CORPUS_CHARS = 60_000  # enough Python for 300 tokens' worth of merges, trained in well under a second
SECOND_BUILD_S = 5  # a cache hit reads file names and sizes and maps two files: well under this


def python_text(chars: int = CORPUS_CHARS) -> str:
    return stdlib_text(stdlib_files())[:chars]


def write_corpus(tmp_path: Path) -> tuple[Path, str]:
    """Python source, then a tail (inside the 10% validation split) that repeats VAL_ONLY."""
    tail = f"{VAL_ONLY} = {VAL_ONLY}({VAL_ONLY})\n" * 100
    text = python_text() + tail
    assert len(tail) < 0.1 * len(text)
    path = tmp_path / "corpus.txt"
    path.write_text(text)
    return path, text


def bpe_overrides(path: Path, *more: str) -> list[str]:
    return ["data=text", f"data.path={path}", "data.tokenizer=bpe", f"data.vocab_size={VOCAB}",
            "model.block_size=32", *more]


def build(overrides: list[str]):
    return build_data(validate_data_config(compose_cfg(overrides).data))


def val_text(text: str, val_fraction: float = 0.1) -> str:
    return text[len(text) - int(len(text) * val_fraction):]


def test_bpe_on_a_text_file_trains_on_the_train_split_only(tmp_path):
    path, text = write_corpus(tmp_path)
    train_set, val_set, meta = build(bpe_overrides(path))
    tokenizer = Tokenizer.from_file(meta.tokenizer_file)
    assert meta.vocab_size == tokenizer.get_vocab_size() == VOCAB
    assert tokenizer.decode(np.asarray(val_set.tokens).tolist()) == val_text(text)
    assert tokenizer.decode(np.asarray(train_set.tokens).tolist()) + val_text(text) == text
    assert max(np.asarray(train_set.tokens).max(), np.asarray(val_set.tokens).max()) < meta.vocab_size
    # The tail's word is the corpus's most frequent one: trained on all of it, BPE merges it whole.
    assert any(VAL_ONLY in token for token in bpe.train_bpe(text, VOCAB).get_vocab())
    assert not any(VAL_ONLY[:4] in token for token in tokenizer.get_vocab())


def test_pieces_encode_to_the_ids_of_the_whole_text(monkeypatch):
    text = python_text(20_000) + "tabs\t\t and\r\n\r\n  \u00a0odd\u3000 spaces   \n\n\tend"
    tokenizer = bpe.train_bpe(text, VOCAB)
    monkeypatch.setattr(bpe, "PIECE_CHARS", 20)  # hundreds of cuts
    assert len(list(bpe.pieces(text))) > 300 and "".join(bpe.pieces(text)) == text
    assert bpe.encode(tokenizer, text).tolist() == tokenizer.encode(text).ids
    # another pre-tokenizer could split differently at a cut: such a tokenizer gets the text whole
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    assert bpe.encode(tokenizer, text).tolist() == tokenizer.encode(text).ids


def test_the_cache_is_reused_and_keyed_by_vocab_size_and_file(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(cache))
    trained, real = [], bpe.train_bpe
    monkeypatch.setattr(bpe, "train_bpe", lambda text, vocab_size: trained.append(vocab_size) or real(text, vocab_size))
    path, _ = write_corpus(tmp_path)
    first = build(bpe_overrides(path))[2].tokenizer_file
    train_set, _, meta = build(bpe_overrides(path))
    assert trained == [VOCAB] and meta.tokenizer_file == first and isinstance(train_set.tokens, TokenFile)
    folder = Path(first).parent  # nanoGPT's layout: data=tokens reads it as it is
    tokens_set = build(["data=tokens", f"data.dir={folder}", "model.block_size=32"])
    assert tokens_set[2].vocab_size == VOCAB and np.array_equal(tokens_set[0].tokens, train_set.tokens)
    assert build(bpe_overrides(path, "data.vocab_size=280"))[2].vocab_size == 280
    path.write_text(path.read_text() + "edited = True\n")
    build(bpe_overrides(path))
    assert trained == [VOCAB, 280, VOCAB]
    assert len(list(cache.glob("tokens-*"))) == 3 and not list(cache.glob(".tokens-*"))  # nothing half-built


def test_a_builder_that_loses_the_race_drops_its_copy(tmp_path):
    for name in ("first", "second"):
        staging = tmp_path / name
        staging.mkdir()
        (staging / "meta.json").write_text(name)
        bpe.publish_dir(staging, tmp_path / "target")
    assert (tmp_path / "target" / "meta.json").read_text() == "first" and not (tmp_path / "second").exists()


def test_a_short_run_keeps_the_tokenizer_that_decodes_its_ids(tmp_path):
    path, text = write_corpus(tmp_path)
    _, summary = train([*bpe_overrides(path), *TINY_GPT, "debug=smoke", "logger=none"], tmp_path / "run")
    assert summary["status"] == "completed"
    tokenizer = Tokenizer.from_file(str(tmp_path / "run" / "tokenizer.json"))
    _, val_set, _ = build(bpe_overrides(path))  # the ids the run was evaluated on (from the cache)
    assert tokenizer.get_vocab_size() == VOCAB and tokenizer.decode(np.asarray(val_set.tokens).tolist()) == val_text(text)


def test_a_char_run_writes_no_tokenizer(tmp_path):
    path, _ = write_corpus(tmp_path)
    train(["data=text", f"data.path={path}", *TINY_GPT, "debug=smoke", "logger=none"], tmp_path / "run")
    assert not (tmp_path / "run" / "tokenizer.json").exists()


def test_a_tokenizer_json_file_is_used_as_it_is(tmp_path):
    path, text = write_corpus(tmp_path)
    tokenizer = bpe.train_bpe(text[:20_000], 280)
    tokenizer.enable_truncation(16)  # saved for a model's inputs: must not cut the corpus
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    train_set, val_set, meta = build(["data=text", f"data.path={path}",
                                      f"data.tokenizer={tmp_path / 'tokenizer.json'}"])
    assert meta.vocab_size == 280
    tokenizer.no_truncation()
    assert np.asarray(val_set.tokens).tolist() == tokenizer.encode(val_text(text)).ids
    assert tokenizer.decode(np.asarray(train_set.tokens).tolist()) + tokenizer.decode(np.asarray(val_set.tokens).tolist()) == text


def test_hf_text_file_with_bpe(tmp_path):
    pytest.importorskip("datasets", reason="the hf extra is not installed")
    path, text = write_corpus(tmp_path)
    train_set, val_set, meta = build(["data=hf", "data.format=text", f"data.path={path}", "data.tokenizer=bpe",
                                      f"data.vocab_size={VOCAB}", "model.block_size=32"])
    joined = "\n".join(line for line in text.splitlines() if line)  # one document a non-empty line
    tokenizer = Tokenizer.from_file(meta.tokenizer_file)
    assert meta.vocab_size == VOCAB and tokenizer.decode(np.asarray(val_set.tokens).tolist()) == val_text(joined)
    assert not any(VAL_ONLY[:4] in token for token in tokenizer.get_vocab())


@pytest.mark.slow  # transformers takes seconds to import
def test_hf_still_takes_a_transformers_tokenizer_folder(tmp_path):
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    from transformers import PreTrainedTokenizerFast

    path, text = write_corpus(tmp_path)
    tokenizer = bpe.train_bpe(text, VOCAB)
    PreTrainedTokenizerFast(tokenizer_object=tokenizer).save_pretrained(str(tmp_path / "folder"))
    train_set, _, meta = build(["data=hf", "data.format=text", f"data.path={path}",
                                f"data.tokenizer={tmp_path / 'folder'}", "model.block_size=32"])
    assert meta.vocab_size == VOCAB and meta.tokenizer_file is None and len(train_set) > 0


def test_doctor_checks_the_first_loss_against_ln_of_the_bpe_vocabulary(tmp_path):
    path, _ = write_corpus(tmp_path)
    run(compose_cfg([*bpe_overrides(path), *TINY_GPT, "mode=doctor", "++doctor.overfit_steps=10", "logger=none",
                     "diagnose=false"]), run_dir=tmp_path / "run")
    rows = {r["name"]: r for r in json.loads((tmp_path / "run" / "doctor.json").read_text())["checks"]}
    row = rows["initial loss vs ln(K)"]
    assert row["status"] == "PASS" and f"ln({VOCAB})" in row["measured"], row


@pytest.mark.slow
def test_bpe_on_the_whole_stdlib_corpus(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    overrides = ["data=stdlib", "data.tokenizer=bpe", "data.vocab_size=4096"]
    started = time.perf_counter()
    train_set, val_set, meta = build(overrides)
    built = time.perf_counter() - started
    tokens = len(train_set.tokens) + len(val_set.tokens)
    text = stdlib_text(stdlib_files())
    print(f"stdlib BPE 4096: trained and encoded in {built:.1f}s; {len(text)} chars -> {tokens} tokens "
          f"({len(text) / tokens:.2f} chars a token)")
    assert meta.vocab_size == 4096
    assert Tokenizer.from_file(meta.tokenizer_file).decode(np.asarray(val_set.tokens).tolist()) == val_text(text)
    started = time.perf_counter()
    build(overrides)
    assert time.perf_counter() - started < SECOND_BUILD_S, "the second build must memory-map the cache"


def _refuse(*_args, **_kwargs):
    raise AssertionError("tokenized again instead of read from the cache")


@pytest.mark.parametrize("option", ["text", "hf"])
def test_character_ids_are_encoded_once_and_read_from_the_cache_after(tmp_path, monkeypatch, option):
    """data=text and data=hf with the character tokenizer: a second start reads the cached ids."""
    if option == "hf":
        pytest.importorskip("datasets", reason="the hf extra is not installed")
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    path, _ = write_corpus(tmp_path)
    overrides = [f"data={option}", f"data.path={path}", "model.block_size=32",
                 *(["data.format=text"] if option == "hf" else [])]
    first = build(overrides)
    import harness.data.chars as chars
    import harness.data.hf as hf

    monkeypatch.setattr(chars, "encode_chars", _refuse)
    monkeypatch.setattr(hf, "encode_chars", _refuse)
    second = build(overrides)
    assert isinstance(second[0].tokens, TokenFile) and second[2] == first[2]
    for a, b in zip(first[:2], second[:2]):
        assert np.array_equal(np.asarray(a.tokens), np.asarray(b.tokens))
    path.write_text(path.read_text() + "\nan edit makes a new corpus\n")
    monkeypatch.undo()
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    assert len(build(overrides)[0]) + len(build(overrides)[1]) > len(first[0]) + len(first[1])


@pytest.mark.slow  # transformers takes seconds to import
def test_a_transformers_tokenizer_folder_tokenizes_once(tmp_path, monkeypatch):
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    from transformers import PreTrainedTokenizerFast

    import harness.data.hf as hf

    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    path, text = write_corpus(tmp_path)
    PreTrainedTokenizerFast(tokenizer_object=bpe.train_bpe(text, VOCAB)).save_pretrained(str(tmp_path / "folder"))
    overrides = ["data=hf", "data.format=text", f"data.path={path}", f"data.tokenizer={tmp_path / 'folder'}",
                 "model.block_size=32"]
    first = build(overrides)
    monkeypatch.setattr(hf, "_tokenize", _refuse)
    second = build(overrides)
    assert np.array_equal(np.asarray(first[0].tokens), np.asarray(second[0].tokens)) and second[2] == first[2]
