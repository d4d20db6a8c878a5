"""How photos become square images: aspect kept (`crop`, Resize + CenterCrop) or the whole photo
resized (`squash`), boxes mapped through the crop (also for Xiao et al.'s released squares), and
texture patches sized by the photo they were cut from."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from PIL import Image

from debias_workbench.pipeline.annotations import read_voc_boxes, write_voc_xml
from debias_workbench.pipeline.datasets.released_bias_folders import read_folder
from debias_workbench.pipeline.imageio import Geometry
from debias_workbench.pipeline.segment_stage import segment_item
from debias_workbench.pipeline.segmentation import make_segmenter
from debias_workbench.pipeline.sources import SourceItem
from debias_workbench.pipeline.texture_patches import work_patch_side

TEXTURE = {"patch": 96, "small_patch": 48}
RELEASE = Geometry("crop", 0.875)  # Xiao et al.'s Resize 256 + CenterCrop 224


def _disc(height: int, width: int) -> np.ndarray:
    """A white disc of radius height / 4 at the centre of a black height x width photo."""
    image = np.zeros((height, width, 3), np.uint8)
    cv2.circle(image, (width // 2, height // 2), height // 4, (255, 255, 255), -1)
    return image


def _extent(image: np.ndarray) -> tuple[int, int]:
    """(rows, columns) the white object spans."""
    ys, xs = np.nonzero(image[..., 0] > 127)
    return int(ys.max() - ys.min() + 1), int(xs.max() - xs.min() + 1)


def test_crop_keeps_a_round_object_round_and_squash_flattens_it():
    photo = _disc(120, 240)                           # a 2:1 photo
    rows, cols = _extent(Geometry("crop").apply(photo, 60))
    assert abs(rows - cols) <= 1 and rows == pytest.approx(30, abs=2)  # the disc's 60 px of 120, at half scale
    rows, cols = _extent(Geometry("squash").apply(photo, 60))
    assert cols == pytest.approx(rows / 2, abs=1)    # the whole width in 60 px: half as wide as high
    rows, _ = _extent(RELEASE.apply(photo, 60))
    assert rows == pytest.approx(30 / 0.875, abs=2)  # the central 7/8 of the shorter side: the disc looks larger


def test_the_window_is_centercrops_and_a_released_square_is_kept_whole():
    assert Geometry("crop").window(100, 300) == (0, 100, 100)
    assert RELEASE.window(256, 341) == (16, 58, 224)              # torchvision: Resize 256 + CenterCrop 224
    assert RELEASE.window(224, 224, size=224) is None             # already the stored square: not cut again
    assert Geometry("squash").window(100, 300) is None
    with pytest.raises(ValueError, match="geometry 'stretch'"):
        Geometry("stretch")


def test_boxes_of_a_photo_map_onto_its_released_square(tmp_path):
    """The release's images are Resize 256 + CenterCrop 224 of ImageNet photos, whose XML boxes
    refer to the photo: they map through that crop, not by stretching each axis."""
    xml = tmp_path / "a.xml"
    write_voc_xml(xml, "a.JPEG", 500, 375, "n0", [(250, 187, 300, 237)])   # a box right of the centre
    (box,) = read_voc_boxes(xml, 224, 224, RELEASE)
    # the photo's centred square of 0.875 * 375 = 328 px starts at x = 86, y = 23; scale 224 / 328
    assert box == pytest.approx((112, 112, 146, 146), abs=1)
    write_voc_xml(tmp_path / "s.xml", "s.JPEG", 500, 500, "n0", [(250, 250, 500, 500)])   # a square photo is cut too
    (box,) = read_voc_boxes(tmp_path / "s.xml", 224, 224, RELEASE)
    assert box == pytest.approx((112, 112, 224, 224), abs=1)     # 0.875 * 500 = 438 px from 31: (250 - 31) * 224 / 438
    (stretched,) = read_voc_boxes(xml, 224, 224, Geometry("squash"))   # a squashed copy: each axis scaled
    assert stretched[0] == pytest.approx(112, abs=1) and stretched[1] == pytest.approx(112, abs=1)
    assert stretched[2] - stretched[0] == pytest.approx(50 * 224 / 500, abs=1)


def test_a_segmented_photo_keeps_the_centre_and_records_the_span_of_its_square(tmp_path, tiny_ds_cfg):
    photo = np.full((64, 192, 3), 40, np.uint8)
    photo[16:48, 80:112] = 230                                     # the object at the centre
    path = tmp_path / "wide.png"
    Image.fromarray(photo).save(path)
    xml = tmp_path / "wide.xml"
    write_voc_xml(xml, path.name, 192, 64, "n0", [(80, 16, 112, 48), (170, 20, 190, 40)])  # one box off the square
    item = SourceItem("train/00_dog/wide", path, "train", 0, xml)
    cfg = dict(tiny_ds_cfg, geometry="crop", crop_fraction=1.0)
    image, _, box, quality = segment_item(item, cfg, make_segmenter(cfg["segmentation"]), 0)
    assert quality["source_side"] == 64 and quality["n_boxes"] == 1        # the box outside the square is dropped
    ys, xs = np.nonzero(box)
    assert (ys.min(), ys.max() + 1, xs.min(), xs.max() + 1) == (8, 24, 8, 24)  # 32 px of 64 -> 16 of 32, centred
    assert image[8:24, 8:24].mean() > 200
    _, _, box, quality = segment_item(item, dict(cfg, geometry="squash"), make_segmenter(cfg["segmentation"]), 0)
    ys, xs = np.nonzero(box[:, :24])                                          # the centre object's box
    assert quality["n_boxes"] == 2
    assert (xs.max() + 1 - xs.min()) * 3 == pytest.approx(ys.max() + 1 - ys.min(), abs=3)  # squashed: 3x narrower


def test_texture_patches_cover_the_share_of_the_photo_the_authors_patches_cover():
    assert work_patch_side(224, 224, TEXTURE) == 96      # a 224-px photo: the paper's 96-px patch
    assert work_patch_side(350, 224, TEXTURE) == 61      # 96 px of a 350-px photo is 61 px of its 224-px square
    assert work_patch_side(150, 224, TEXTURE) == 72      # a small photo: the 48-px patch, scaled up
    assert work_patch_side(32, 64, TEXTURE) == 32        # tiny images: half the image, as before


def test_released_folders_squash_by_default_as_the_authors_resize(tmp_path):
    """BiasEnsemble reads BAR and BFFHQ with Resize((224, 224)): the whole photo, squashed."""
    folder = tmp_path / "test"
    folder.mkdir()
    Image.fromarray(_disc(120, 240)).save(folder / "a_0_0.png")
    squashed, _, _ = read_folder([folder], 60, Geometry("squash"), 1, 1)
    cropped, _, _ = read_folder([folder], 60, Geometry("crop"), 1, 1)
    assert _extent(squashed["images"][0])[1] * 2 == pytest.approx(_extent(squashed["images"][0])[0], abs=2)
    assert abs(np.subtract(*_extent(cropped["images"][0]))) <= 1
