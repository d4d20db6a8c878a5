"""GrabCut from boxes, the empty/full-mask rules, and U2-Net from a local model only."""

import numpy as np
import pytest

from debias_workbench.core.errors import PipelineError
from debias_workbench.pipeline.segmentation import U2NetSegmenter, boxes_mask, fallback_box, grabcut
from debias_workbench.pipeline.sources.synthetic import render_sample


def test_grabcut_recovers_a_synthetic_object():
    image, truth, _ = render_sample(1, 64, 1.0, np.random.default_rng(5))  # a square
    ys, xs = np.nonzero(truth)
    seg = grabcut(image, [(xs.min() - 2, ys.min() - 2, xs.max() + 3, ys.max() + 3)], 10, seed=1)
    iou = np.logical_and(seg.mask, truth).sum() / np.logical_or(seg.mask, truth).sum()
    assert seg.status == "ok" and iou > 0.85


def test_grabcut_is_seeded():
    image, truth, _ = render_sample(5, 48, 1.0, np.random.default_rng(2))
    box = [(4, 4, 44, 44)]
    assert np.array_equal(grabcut(image, box, 5, 7).mask, grabcut(image, box, 5, 7).mask)


def test_box_covering_the_whole_image_and_flat_images_are_handled():
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (20, 20, 3), dtype=np.uint8)
    seg = grabcut(image, [(0, 0, 20, 20)], 3, 0)  # no certain background: border becomes probable bg
    assert seg.mask.shape == (20, 20) and seg.status in ("ok", "full", "empty->box")
    flat = np.full((20, 20, 3), 128, np.uint8)
    seg = grabcut(flat, [(5, 5, 15, 15)], 3, 0)
    assert seg.status in ("empty->box", "ok")
    if seg.status == "empty->box":
        assert np.array_equal(seg.mask, boxes_mask([(5, 5, 15, 15)], 20, 20))


def test_fallback_box_is_centred():
    assert fallback_box(100, 50, 0.8) == (10, 5, 90, 45)


def test_u2net_without_model_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("U2NET_HOME", str(tmp_path))
    with pytest.raises(PipelineError, match="u2netp.onnx"):
        U2NetSegmenter(None)
    (tmp_path / "u2netp.onnx").write_bytes(b"not a model")
    with pytest.raises(PipelineError, match="md5"):
        U2NetSegmenter(str(tmp_path / "u2netp.onnx"))


def test_u2net_segments_a_photo(monkeypatch):
    from .conftest import needs_shared
    from debias_workbench.pipeline.imageio import load_rgb
    import cv2

    model = needs_shared("models/u2netp.onnx")
    photo = needs_shared("data/in9-photos-dev/01_bird/n01518878_ostrich.JPEG")
    image = cv2.resize(load_rgb(photo, 16), (160, 160))
    seg = U2NetSegmenter(str(model))(image, [(16, 16, 144, 144)])
    assert seg.status == "ok" and 0.02 < seg.mask.mean() < 0.9
    # the ostrich stands in the middle of the photo: an inverted mask would cover the borders
    assert seg.mask[:16].sum() + seg.mask[-16:].sum() + seg.mask[:, :16].sum() + seg.mask[:, -16:].sum() == 0


@pytest.mark.parametrize("label", [0, 8])  # a square and a shape of its own, on their class's background
def test_u2net_foreground_is_where_the_object_is(label):
    """Catches an inverted mask (background marked as foreground, e.g. the threshold compared the
    wrong way) and a mask shifted or resized off the object: on a synthetic image with a known
    object mask, U2-Net's foreground covers the object and almost nothing else."""
    from .conftest import needs_shared

    model = needs_shared("models/u2netp.onnx")
    image, truth, _ = render_sample(label, 160, 1.0, np.random.default_rng(5))
    truth = truth.astype(bool)
    assert 0.1 < truth.mean() < 0.3  # an object, not the whole image
    seg = U2NetSegmenter(str(model))(image, [(16, 16, 144, 144)])
    mask = seg.mask.astype(bool)
    assert seg.status == "ok" and seg.mask.dtype == np.uint8 and set(np.unique(seg.mask).tolist()) <= {0, 1}
    assert mask[truth].mean() > 0.9 and mask[~truth].mean() < 0.05
    assert np.logical_and(mask, truth).sum() / np.logical_or(mask, truth).sum() > 0.9
