"""How photos become square images: aspect kept (`crop`) or whole photo resized (`squash`), the
objects kept in the crop, and texture patches sized by the photo they were cut from."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
from PIL import Image

from pipeline.annotations import write_voc_xml
from pipeline.datasets.released_bias_folders import read_folder
from pipeline.derived_stage import work_patch_side
from pipeline.imageio import square_window, to_square
from pipeline.segment_stage import segment_item
from pipeline.segmentation import make_segmenter
from pipeline.sources import SourceItem

TEXTURE = {"patch": 96, "small_patch": 48}


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
    rows, cols = _extent(to_square(photo, 60, "crop"))
    assert abs(rows - cols) <= 1 and rows == pytest.approx(30, abs=2)  # the disc's 60 px of 120, at half scale
    rows, cols = _extent(to_square(photo, 60, "squash"))
    assert cols == pytest.approx(rows / 2, abs=1)    # the whole width in 60 px: half as wide as high


def test_the_square_window_follows_the_objects_and_stays_in_the_photo():
    assert square_window(100, 300) == (0, 100, 100)
    assert square_window(100, 300, (280, 50)) == (0, 200, 100)    # clamped at the right edge
    assert square_window(300, 100, (50, 60)) == (10, 0, 100)
    with pytest.raises(ValueError, match="geometry 'stretch'"):
        to_square(np.zeros((4, 8, 3), np.uint8), 4, "stretch")


def test_a_segmented_photo_keeps_its_object_when_it_sits_at_the_edge(tmp_path, tiny_ds_cfg):
    """A 64 x 192 photo whose object is at the right end: the crop moves to it (a centred crop
    would hold none of it), boxes follow, and the photo's side is recorded for the texture."""
    photo = np.full((64, 192, 3), 40, np.uint8)
    photo[16:48, 150:182] = 230
    path = tmp_path / "wide.png"
    Image.fromarray(photo).save(path)
    xml = tmp_path / "wide.xml"
    write_voc_xml(xml, path.name, 192, 64, "n0", [(150, 16, 182, 48)])
    item = SourceItem("train/00_dog/wide", path, "train", 0, xml)
    cfg = dict(tiny_ds_cfg, geometry="crop")
    image, mask, box, quality = segment_item(item, cfg, make_segmenter(cfg["segmentation"]), 0)
    assert quality["source_side"] == 64
    ys, xs = np.nonzero(box)
    assert (ys.min(), ys.max() + 1) == (8, 24) and xs.max() + 1 > 24       # 32 px of 64 -> 16 of 32, at the right
    assert image[ys.min():ys.max() + 1, xs.min():xs.max() + 1].mean() > 200  # the box holds the object
    squashed, _, box, _ = segment_item(item, dict(cfg, geometry="squash"), make_segmenter(cfg["segmentation"]), 0)
    ys, xs = np.nonzero(box)
    assert (xs.max() + 1 - xs.min()) * 3 == pytest.approx(ys.max() + 1 - ys.min(), abs=2)  # 3x narrower than high


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
    squashed, _, _ = read_folder([folder], 60, "squash", 1, 1)
    cropped, _, _ = read_folder([folder], 60, "crop", 1, 1)
    assert _extent(squashed["images"][0])[1] * 2 == pytest.approx(_extent(squashed["images"][0])[0], abs=2)
    assert abs(np.subtract(*_extent(cropped["images"][0]))) <= 1
