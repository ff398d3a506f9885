"""The sampler and the token reader cost O(batch), not O(corpus): epoch orders are computed a chunk
at a time, token files are read with pread, and nothing runs on a side thread."""
from __future__ import annotations

import pickle
import threading

import numpy as np
import pytest
import torch

from harness.data.base import TokenWindows
from harness.data.loader import BatchRecipe, LoaderSettings, TrainBatches
from harness.data.prior import prior_loss
from harness.data.sampler import CHUNK, BatchStream, KeyedPermutation, epoch_slice, eval_indices
from harness.data.token_file import TokenFile


@pytest.mark.parametrize("n", [1, 2, 3, 7, 64, 1000, CHUNK - 1, CHUNK + 5])
def test_keyed_permutation_is_a_bijection_of_the_index_range(n):
    image = KeyedPermutation(n, (1337, 0))(np.arange(n))
    assert sorted(image.tolist()) == list(range(n))


def test_epoch_orders_differ_between_epochs_and_seeds_and_repeat_exactly():
    n = 3 * CHUNK + 11  # several chunks, and a short last one
    order = torch.cat([epoch_slice(n, 7, 0, True, s, min(s + 1000, n)) for s in range(0, n, 1000)])
    assert sorted(order.tolist()) == list(range(n))  # every sample once per epoch, across chunk seams
    assert torch.equal(order[:500], epoch_slice(n, 7, 0, True, 0, 500))
    assert not torch.equal(order[:500], epoch_slice(n, 7, 1, True, 0, 500))
    assert not torch.equal(order[:500], epoch_slice(n, 8, 0, True, 0, 500))
    assert torch.equal(epoch_slice(n, 7, 3, False, 10, 20), torch.arange(10, 20))


def test_first_samples_of_an_epoch_are_uniform_over_the_dataset():
    n, epochs = 100, 4000
    firsts = np.array([int(epoch_slice(n, 0, e, True, 0, 1)) for e in range(epochs)])
    counts = np.bincount(firsts, minlength=n)
    chi2 = float(((counts - epochs / n) ** 2 / (epochs / n)).sum())
    assert chi2 < 160  # 99 degrees of freedom: p < 1e-4 above 160


def test_a_stream_over_a_trillion_samples_starts_and_turns_epochs_at_once():
    stream = BatchStream(10**12, 64, seed=3)
    first = stream.next_batch()
    stream.load_state_dict({"epoch": 0, "offset": 10**12 - 64})
    last = stream.next_batch()
    after = stream.next_batch()
    assert stream.state_dict() == {"epoch": 1, "offset": 64}
    assert len(set(first.tolist()) | set(last.tolist())) == 128 and int(after.max()) < 10**12
    assert len(eval_indices(10**12, 100).unique()) == 100


def test_batches_are_identical_for_any_batch_split():
    """64 at a time walks the same order as 16 at a time: the order belongs to the epoch."""
    big, small = BatchStream(1000, 64, seed=5), BatchStream(1000, 16, seed=5)
    assert torch.equal(big.next_batch(), torch.cat([small.next_batch() for _ in range(4)]))


def test_no_thread_is_started_by_training_data(tmp_path):
    ids = np.arange(5000, dtype=np.uint16) % 50
    ids.tofile(tmp_path / "train.bin")
    before = threading.active_count()
    windows = TokenWindows(TokenFile(tmp_path / "train.bin"), 16)
    batches = TrainBatches(windows, BatchRecipe(), LoaderSettings(), BatchStream(len(windows), 8, seed=0), 0, 1, 1, 0)
    for _ in range(5):
        for mb in batches.next_update():
            batches.fetch(mb)
    batches.close()
    assert threading.active_count() == before


def test_token_file_reads_what_a_memmap_reads(tmp_path):
    ids = np.random.default_rng(0).integers(0, 60000, size=10_000, dtype=np.uint16)
    ids.tofile(tmp_path / "ids.bin")
    tokens = TokenFile(tmp_path / "ids.bin")
    assert len(tokens) == 10_000 and np.array_equal(np.asarray(tokens), ids)
    view = tokens[100:-200]  # a contiguous view, as the char corpora's train/val split
    assert len(view) == 9700 and np.array_equal(np.asarray(view), ids[100:-200])
    starts = np.array([0, 5, 9000, 9700 - 33])
    assert np.array_equal(view.windows(starts, 33), ids[100:-200][starts[:, None] + np.arange(33)])
    restored = pickle.loads(pickle.dumps(view))  # DataLoader workers started by spawn
    assert np.array_equal(restored.read(10, 20), ids[110:120])
    with pytest.raises(IndexError, match="outside a view of 9700"):
        view.windows(np.array([9700 - 32]), 33)
    with pytest.raises(TypeError, match="contiguous"):
        tokens[::2]


def test_windows_from_a_file_match_windows_in_memory_and_so_does_the_prior(tmp_path):
    ids = (np.arange(3_000_000) * 7919 % 997).astype(np.uint16)  # above the prior's counting limit
    ids.tofile(tmp_path / "ids.bin")
    from_file, in_memory = TokenWindows(TokenFile(tmp_path / "ids.bin"), 8), TokenWindows(ids, 8)
    idx = torch.tensor([0, 17, 2_999_000])
    assert all(torch.equal(a, b) for a, b in zip(from_file.gather(idx), in_memory.gather(idx)))
    from harness.data.base import DataMeta

    meta = DataMeta("lm", vocab_size=997, block_size=8)
    assert prior_loss(from_file, meta) == pytest.approx(prior_loss(in_memory, meta))
    assert prior_loss(from_file, meta) == pytest.approx(np.log(997), abs=0.01)  # evenly spread ids


def test_building_a_run_starts_no_thread(tmp_path):
    """Torch work on a side thread throttles the training thread's OpenMP team (docs/architecture.md):
    assembling a run (data, model, optimizer, loaders) must leave this process's thread count alone."""
    from conftest import TINY_GPT, compose_cfg

    from harness.assembly.assemble import assemble
    from harness.config.run_config import validate_config

    before = {t.ident for t in threading.enumerate()}
    cfg = compose_cfg([*TINY_GPT, "debug=smoke", "logger=none", "diagnose=false"])
    built = assemble(validate_config(cfg), tmp_path / "run", torch.device("cpu"), None)
    trainer = built.trainer
    try:
        trainer.advance()
        assert {t.ident for t in threading.enumerate()} == before
    finally:
        trainer.close()
