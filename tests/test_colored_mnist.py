"""Colored MNIST (LfF protocol): exact colour counts per class, colour on the strokes, seeded bytes."""

from __future__ import annotations

import copy
import json

import numpy as np
import zarr

from debias_workbench.pipeline.stroke_colours import MEAN_COLOURS, colour_strokes, conflicting_colours, independent_colours
from debias_workbench.pipeline.datasets import get_family


def test_conflicting_counts_are_exact_per_class():
    labels = np.repeat(np.arange(10), [400, 380, 361, 420, 399, 350, 410, 405, 390, 386])
    colours = conflicting_colours(labels, 0.05, "t")
    for y in range(10):
        own = colours[labels == y]
        n_conflict = int(round(0.05 * (labels == y).sum()))
        assert (own != y).sum() == n_conflict
        counts = np.bincount(own[own != y], minlength=10)
        others = np.delete(counts, y)
        assert others.max() - others.min() <= 1 and counts[y] == 0
    assert np.array_equal(colours, conflicting_colours(labels, 0.05, "t"))
    assert not np.array_equal(colours, conflicting_colours(labels, 0.05, "u"))
    test = independent_colours(1003, "t")
    assert np.bincount(test).max() - np.bincount(test).min() <= 1


def test_colour_is_on_the_strokes_with_seeded_noise():
    digit = np.zeros((1, 28, 28), np.uint8)
    digit[0, 10:18, 12:16] = 255
    image = colour_strokes(digit, np.array([2]), 0.0, "n")[0]
    assert (image[digit[0] == 0] == 0).all()                                     # black background
    assert np.array_equal(image[12, 13], np.rint(MEAN_COLOURS[2] * 255).astype(np.uint8))
    noisy = colour_strokes(np.repeat(digit, 50, 0), np.full(50, 2), 0.05, "n")
    spread = noisy[:, 12, 13].astype(float).std(0)
    assert (spread[MEAN_COLOURS[2] * 255 < 200] > 3).all()                       # per-image noise where not clipped
    assert np.array_equal(noisy, colour_strokes(np.repeat(digit, 50, 0), np.full(50, 2), 0.05, "n"))


def test_stores_follow_the_protocol_and_rebuild_identically(tmp_path, default_config):
    cfg = copy.deepcopy(default_config["datasets"]["colored_mnist"])
    cfg.update(conflict_percents=[2], source={"kind": "sklearn_digits", "test_fraction": 0.2, "copies": 1})
    family = get_family("colored_mnist")
    assert family.variants(cfg) == ["conflict_2", "unbiased"]
    for run in ("a", "b"):
        for variant in family.variants(cfg):
            family.run_step("variant", cfg, 0, tmp_path / run / f"{variant}.zarr", [], 1, variant)
    train = zarr.open_group(str(tmp_path / "a" / "conflict_2.zarr"), mode="r")["train"]
    labels, colours = train["labels"][:], train["bias_labels"][:]
    for y in range(10):
        assert (colours[labels == y] != y).sum() == round(0.02 * (labels == y).sum())
    manifest = json.loads((tmp_path / "a" / "conflict_2.manifest.json").read_text())
    assert manifest["train"]["conflicting"] == int((colours != labels).sum())
    val = zarr.open_group(str(tmp_path / "a" / "conflict_2.zarr"), mode="r")["val"]
    assert np.bincount(val["bias_labels"][:], minlength=10).max() - np.bincount(val["bias_labels"][:]).min() <= 1
    assert manifest["val"]["conflict_percent"] is None  # model selection on colours independent of the digit
    test = zarr.open_group(str(tmp_path / "a" / "unbiased.zarr"), mode="r")["val"]
    assert abs((test["bias_labels"][:] == test["labels"][:]).mean() - 0.1) < 0.05
    for variant in family.variants(cfg):
        a, b = (sorted(p.read_bytes() for p in (tmp_path / r / f"{variant}.zarr").rglob("*") if p.is_file()
                       and p.name != "zarr.json") for r in ("a", "b"))
        assert a == b
