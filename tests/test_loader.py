"""The zarr loader: every row once per epoch, seeded per epoch, chunk-aware when streaming."""

import numpy as np
import pytest
import torch
import zarr

from pipeline.fingerprint import write_fingerprint
from training.data import Augmenter, ZarrBatches


@pytest.fixture
def store(tmp_path):
    n = 50
    g = zarr.open_group(str(tmp_path / "s.zarr"), mode="w")
    g.attrs["classes"] = ["a", "b"]
    t = g.create_group("train")
    images = np.zeros((n, 4, 4, 3), np.uint8)
    images[:, 0, 0, 0] = np.arange(n)  # pixel encodes the row
    t.create_array("images", data=images, chunks=(8, 4, 4, 3))
    t.create_array("labels", data=np.arange(n, dtype=np.int64) % 2, chunks=(n,))
    t.create_array("bias_labels", data=np.arange(n, dtype=np.int64) % 3, chunks=(n,))
    write_fingerprint(tmp_path / "s.zarr")
    return tmp_path / "s.zarr"


@pytest.mark.parametrize("in_memory_max_gb", [4.0, 0.0])
def test_each_epoch_is_a_seeded_permutation(store, in_memory_max_gb):
    loader = ZarrBatches(store, "train", 7, shuffle=True, seed=3, name="t", in_memory_max_gb=in_memory_max_gb,
                         read_chunks=1, window_reads=2)
    def rows(epoch):
        out = []
        for b in loader.epoch(epoch):
            assert torch.equal(b["images"][:, 0, 0, 0].long(), b["index"])  # fields stay aligned
            assert torch.equal(b["labels"], b["index"] % 2) and torch.equal(b["bias_labels"], b["index"] % 3)
            out += b["index"].tolist()
        return out
    e0, e0_again, e1 = rows(0), rows(0), rows(1)
    assert sorted(e0) == list(range(50)) == sorted(e1)
    assert e0 == e0_again and e0 != e1 and e0 != list(range(50))
    assert len(loader) == 8


def test_streaming_reads_whole_chunks(store):
    """Catches a streaming loader that yields only short (or empty) batches, which made the chunk
    check below vacuous, and one that drops or repeats rows: 50 rows in batches of 8 are exactly
    6 full batches and a last one of 2, every row once; each full batch spans at most 2 chunks."""
    loader = ZarrBatches(store, "train", 8, shuffle=True, seed=0, in_memory_max_gb=0.0, read_chunks=1, window_reads=1, prefetch=0)
    assert loader._cache is None  # streaming, not the in-memory path
    batches = [batch["index"] for batch in loader.epoch(0)]
    assert [len(b) for b in batches] == [8] * 6 + [2]
    assert sorted(torch.cat(batches).tolist()) == list(range(50))
    full = 0
    for index in batches:
        # with a one-chunk window (8-row chunks) a batch spans at most 2 units
        if len(index) == 8:
            assert len(set((index // 8).tolist())) <= 2
            full += 1
    assert full == 6


def test_drop_last_and_no_shuffle(store):
    loader = ZarrBatches(store, "train", 16, shuffle=False, drop_last=True)
    got = [b["index"].tolist() for b in loader.epoch(0)]
    assert got == [list(range(i, i + 16)) for i in (0, 16, 32)]


def test_augmenter_identity_and_flip():
    images = torch.randint(0, 256, (3, 8, 8, 3), dtype=torch.uint8)
    aug = Augmenter([0.5, 0.5, 0.5], [0.25, 0.25, 0.25])
    x = aug(images, torch.Generator().manual_seed(0))
    assert torch.allclose(x, aug.normalize(images), atol=1e-5)
    assert torch.allclose(aug.normalize(images)[0, :, 0, 0], (images[0, 0, 0].float() / 255 - 0.5) / 0.25)
    flip = Augmenter([0.5] * 3, [0.25] * 3, hflip=True)
    g = torch.Generator().manual_seed(1)
    y = flip(images, g)
    for i in range(3):
        assert torch.allclose(y[i], x[i], atol=1e-5) or torch.allclose(y[i], x[i].flip(-1), atol=1e-5)
