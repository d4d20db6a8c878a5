"""Exact pixel expectations for every Background-Challenge variant."""

import numpy as np
import pytest
import zarr

from debias_workbench.core.atomic import write_json
from debias_workbench.core.errors import SkipItem
from debias_workbench.pipeline import variants
from debias_workbench.pipeline.variant_stage import run_variant_stage


def _image(h=6, w=6, offset=0):
    return (np.arange(h * w * 3, dtype=np.int64).reshape(h, w, 3) * 3 + offset).astype(np.uint8)


def test_only_fg_no_fg_only_bg_b_are_masks_applied():
    image = _image()
    fg = np.zeros((6, 6), np.uint8)
    fg[2:4, 1:3] = 1
    box = np.zeros((6, 6), np.uint8)
    box[1:5, 1:4] = 1
    assert np.array_equal(variants.only_fg(image, fg), np.where(fg[..., None] == 1, image, 0))
    assert np.array_equal(variants.no_fg(image, fg), np.where(fg[..., None] == 1, 0, image))
    assert np.array_equal(variants.only_bg_b(image, box), np.where(box[..., None] == 1, 0, image))


def test_only_bg_t_tiles_the_largest_strip_into_the_box():
    image = _image()
    box = np.zeros((6, 6), np.uint8)
    box[1:3, 0:6] = 1  # full-width box on rows 1-2: strips are row 0 (6 px) and rows 3-5 (18 px)
    out, status = variants.only_bg_t(image, box)
    assert status == "ok"
    strip = image[3:6]  # the largest strip, tiled from the top-left corner
    expected = image.copy()
    expected[1:3] = np.tile(strip, (2, 1, 1))[1:3]
    assert np.array_equal(out, expected)
    assert np.array_equal(out[box == 0], image[box == 0])


def test_only_bg_t_with_box_covering_everything_uses_mean_colour():
    image = _image()
    out, status = variants.only_bg_t(image, np.ones((6, 6), np.uint8))
    assert "mean colour" in status
    assert np.all(out == np.rint(image.reshape(-1, 3).mean(0)).astype(np.uint8))


def _outline(mask: np.ndarray) -> np.ndarray:
    """Hand-computed outline of a (H, W) 0/1 mask: the pixels whose 3x3 neighbourhood (inside the
    image) holds both foreground and background, i.e. one pixel either side of the boundary."""
    h, w = mask.shape
    out = np.zeros_like(mask, dtype=bool)
    for y in range(h):
        for x in range(w):
            values = set(mask[max(0, y - 1):y + 2, max(0, x - 1):x + 2].ravel().tolist())
            out[y, x] = values == {0, 1}
    return out


def _assert_is_a_sketch_of(sketches: np.ndarray, masks: np.ndarray) -> None:
    """Properties every sketch has, whatever the image: grey black-on-white (0 or 255, equal
    channels), the object's outline black, and everything more than a pixel from the object white."""
    assert sketches.dtype == np.uint8 and set(np.unique(sketches).tolist()) <= {0, 255}
    assert (sketches == sketches[..., :1]).all()
    for sketch, mask in zip(sketches[..., 0], masks):
        assert (sketch[_outline(mask)] == 0).all()
        near = _outline(mask) | (mask == 1)
        assert (sketch[~near] == 255).all()


def test_sketch_of_flat_images_is_blank_or_the_outline_whatever_the_colour():
    """Catches an inverted sketch (white lines on black), a missing mask outline (a dim object
    has no Canny edge: only the outline draws it), colour leaking into the output, and masks
    paired with the wrong image of the batch: a flat image gives a blank sketch when its mask
    is empty or full, else exactly its mask's outline, hand-computed."""
    square = np.zeros((12, 12), np.uint8)
    square[3:9, 4:10] = 1
    disc = (np.hypot(*np.mgrid[-6:6, -6:6] + 0.5) < 4).astype(np.uint8)
    images = np.stack([np.full((12, 12, 3), c, np.uint8) for c in ((200, 30, 90), (12, 10, 8), (255, 255, 255), (90, 90, 90))])
    masks = np.stack([square, disc, np.zeros((12, 12), np.uint8), np.ones((12, 12), np.uint8)])
    out = variants.sketch(images, masks)
    assert out.shape == images.shape
    assert np.array_equal(out[0], np.where(_outline(square)[..., None], 0, 255).repeat(3, -1).astype(np.uint8))
    assert np.array_equal(out[1], np.where(_outline(disc)[..., None], 0, 255).repeat(3, -1).astype(np.uint8))
    assert (out[2:] == 255).all()  # nothing to draw: no object, or a flat object filling the image
    _assert_is_a_sketch_of(out, masks)


def test_sketch_draws_a_step_edge_inside_the_object_along_the_edge_and_ignores_the_background():
    """Catches a sketch taken from the whole image instead of the foreground alone (background
    texture drawn), and inner edges drawn off their place: a vertical step inside a full-image
    object gives one black pixel per row, on one of the two columns beside the step, and nothing
    else; the same step in the background of a flat object leaves only the object's outline."""
    step = np.zeros((1, 12, 12, 3), np.uint8)
    step[0, :, :6], step[0, :, 6:] = 40, 220
    inside = variants.sketch(step, np.ones((1, 12, 12), np.uint8))[0, ..., 0]
    ys, xs = np.nonzero(inside == 0)
    assert sorted(ys.tolist()) == list(range(12)) and set(xs.tolist()) <= {5, 6}
    background = np.zeros((1, 12, 12, 3), np.uint8)
    background[0, :6] = 255  # a horizontal step across the image, away from the object
    background[0, 7:11, 3:9] = 120  # the object: flat, below the step
    mask = np.zeros((1, 12, 12), np.uint8)
    mask[0, 7:11, 3:9] = 1
    out = variants.sketch(background, mask)[0, ..., 0]
    assert np.array_equal(out == 0, _outline(mask[0]))


def test_composite_is_bg_times_one_minus_m_plus_image_times_m():
    image, bg = _image(), _image(offset=1)
    fg = np.eye(6, dtype=np.uint8)
    out = variants.composite(bg, image, fg)
    assert np.array_equal(out, np.where(fg[..., None] == 1, image, bg))


def test_choose_partner_rules():
    by_class = [np.array([0, 1, 2]), np.array([3, 4]), np.array([5])]
    rng = np.random.default_rng(0)
    for _ in range(50):
        assert variants.choose_partner("mixed_same", 0, 1, by_class, rng) in (0, 2)
        assert variants.choose_partner("mixed_next", 1, 3, by_class, rng) == 5
        assert variants.choose_partner("mixed_next", 2, 5, by_class, rng) in (0, 1, 2)
        assert variants.choose_partner("mixed_rand", 0, 0, by_class, rng) != 0
    drawn = {variants.choose_partner("mixed_rand", 0, 0, by_class, rng) for _ in range(200)}
    assert drawn >= {3, 4, 5}  # every class can give a background
    with pytest.raises(SkipItem):
        variants.choose_partner("mixed_same", 2, 5, by_class, rng)  # class 2 has no other image


def _hand_made_segmented_store(path, n=6, size=8):
    """An intermediate store with known images, masks, boxes and backgrounds (2 classes)."""
    rng = np.random.default_rng(1)
    g = zarr.open_group(str(path), mode="w")
    arrays = {
        "images": rng.integers(0, 256, (n, size, size, 3), dtype=np.uint8),
        "bg_t": rng.integers(0, 256, (n, size, size, 3), dtype=np.uint8),
        "masks": (rng.random((n, size, size)) < 0.3).astype(np.uint8),
        "box_masks": (rng.random((n, size, size)) < 0.5).astype(np.uint8),
        "labels": np.array([0, 0, 0, 1, 1, 1], np.int64),
        "ok": np.array([1, 1, 1, 1, 1, 0], np.uint8),  # the last item was skipped upstream
    }
    for name, value in arrays.items():
        g.create_array(name, data=value, chunks=(1, *value.shape[1:]))
    g.create_array("ids", shape=(n,), dtype=str, chunks=(n,))[:] = np.array([f"val/c/img{i}" for i in range(n)])
    g.create_array("splits", shape=(n,), dtype=str, chunks=(n,))[:] = np.array(["val"] * n)
    g.attrs.update(classes=["00_a", "01_b"], image_size=size)
    return arrays


# the held-out variants keep no val row of their base (their val split is held out of train: test_matrix checks it)
@pytest.mark.parametrize("variant", [v for v in variants.VARIANTS if not v.endswith(variants.HELDOUT)])
def test_variant_stage_writes_exact_pixels(tmp_path, variant):
    arrays = _hand_made_segmented_store(tmp_path / "seg.zarr")
    write_json(tmp_path / "seg.json", {"val": {"inputs": 6, "outputs": 5,
                                               "skipped": [{"id": "val/c/img5", "path": "x", "reason": "corrupt"}]}})
    ds_cfg = {"chunk_images": 2, "block_images": 4, "image_codec": "lz4"}
    out = tmp_path / f"{variant}.zarr"
    run_variant_stage(tmp_path / "seg.zarr", tmp_path / "seg.json", variant, ds_cfg, 0, out,
                      tmp_path / f"{variant}.manifest.json", workers=1)
    g = zarr.open_group(str(out), mode="r")["val"]
    ids = list(g["ids"][:])
    rows = [int(i[-1]) for i in ids]
    img, fg, box, bg = (arrays[k][rows] for k in ("images", "masks", "box_masks", "bg_t"))
    m = fg[..., None]
    if variant in variants.MIXED:
        # every output is this image's foreground over SOME usable image's ONLY_BG_T background
        for k, row in enumerate(rows):
            partner = int(g["bias_labels"][k])
            assert partner in (0, 1)
            candidates = [j for j in range(5) if arrays["labels"][j] == partner and j != row]
            assert any(np.array_equal(g["images"][k], bg_j * (1 - m[k]) + img[k] * m[k])
                       for bg_j in arrays["bg_t"][candidates])
            if variant == "mixed_same":
                assert partner == arrays["labels"][row]
            if variant == "mixed_next":
                assert partner == (arrays["labels"][row] + 1) % 2
    else:
        expected = {"original": img, "only_fg": img * m, "no_fg": img * (1 - m),
                    "only_bg_b": img * (1 - box[..., None]), "only_bg_t": bg, "sketch": variants.sketch(img, fg)}[variant]
        assert np.array_equal(g["images"][:], expected)
        if variant == "sketch":  # and independently of variants.sketch: black lines on white, on the object only
            _assert_is_a_sketch_of(g["images"][:], fg)
        no_background = variant in ("only_fg", "sketch")
        assert list(g["bias_labels"][:]) == ([-1] * len(rows) if no_background else list(arrays["labels"][rows]))
    assert ("masks" in g) == (variant in variants.WITH_FOREGROUND)
    if "masks" in g:
        assert np.array_equal(g["masks"][:], fg)
    manifest = __import__("json").loads((tmp_path / f"{variant}.manifest.json").read_text())["val"]
    assert manifest["inputs"] == manifest["outputs"] + len(manifest["skipped"]) == 6


def test_background_biased_counts_are_exact_per_class():
    """bg_conflict_<p>: round(p * n_y) images of class y on other classes' backgrounds, spread
    evenly over them; the choice follows the ids, not their order."""
    labels = np.repeat(np.arange(9), 100)
    ids = np.array([f"img{k:04d}" for k in range(len(labels))])
    background = variants.background_classes(labels, ids, 9, 0.05, seed=0)
    for y in range(9):
        own = background[labels == y]
        assert (own != y).sum() == 5
        other = np.bincount(own[own != y], minlength=9)
        assert other[y] == 0 and np.delete(other, y).max() <= 1
    perm = np.random.default_rng(0).permutation(len(ids))
    assert np.array_equal(variants.background_classes(labels[perm], ids[perm], 9, 0.05, seed=0), background[perm])


def test_background_biased_store_puts_each_foreground_on_its_assigned_class(tmp_path, tiny_stores):
    from debias_workbench.pipeline.datasets import get_family

    from .conftest import tiny_stores_config

    cfg = tiny_stores_config()
    root = tiny_stores["original"].parent
    get_family("in9").run_step("variant", cfg, 0, tmp_path / "bg_conflict_50.zarr",
                               [root / "seg.zarr", root / "segmented.manifest.json"], 1, "bg_conflict_50")
    for split in ("train", "val"):
        g = zarr.open_group(str(tmp_path / "bg_conflict_50.zarr"), mode="r")[split]
        labels, bias = g["labels"][:], g["bias_labels"][:]
        for y in range(9):  # 2 images per class: round(0.5 * 2) = 1 on another class's background
            assert (bias[labels == y] != y).sum() == 1
    assert get_family("in9").test_sets({**cfg, "bg_conflict_percents": [50]}, "bg_conflict_50") == {
        "valid": "bg_conflict_50", "unbiased": "mixed_rand"}
