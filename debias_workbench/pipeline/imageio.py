"""Decoding source images into RGB uint8 arrays, with a clear reason for every rejection."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import cv2
import numpy as np
from PIL import Image, UnidentifiedImageError

from debias_workbench.core.errors import SkipItem

IMAGE_SUFFIXES = {".jpeg", ".jpg", ".png", ".bmp", ".webp", ".tif", ".tiff"}
#: pixels: a released image, style or background with a shorter side is a broken or placeholder
#: file, not a picture (the user's own folders have `min_image_side` in their config instead)
MIN_PICTURE_SIDE = 8


def is_image_name(path: Path) -> bool:
    return path.suffix.lower() in IMAGE_SUFFIXES


def load_rgb(path: Path, min_side: int) -> np.ndarray:
    """Decode `path` fully and return it as (H, W, 3) uint8 RGB.

    Grayscale, palette, CMYK and 16-bit images are converted; an alpha channel is
    composited onto black (transparent pixels carry no scene content). Truncated or
    corrupt files, and images with a side shorter than `min_side`, raise `SkipItem`.
    """
    if not is_image_name(path):
        raise SkipItem(f"not an image file (suffix {path.suffix!r}); remove it from the class folder")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(path) as im:
                im.load()  # forces a full decode: truncated data fails here, not later
                rgb = _to_rgb(im)
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, Image.DecompressionBombWarning) as exc:
        raise SkipItem(f"cannot decode image ({type(exc).__name__}: {exc}); re-download or delete the file") from exc
    height, width = rgb.shape[:2]
    if min(height, width) < min_side:
        raise SkipItem(
            f"image is {width}x{height}, smaller than min_image_side={min_side}; "
            "remove it or lower `min_image_side` in the dataset config"
        )
    return rgb


def resize_square(image: np.ndarray, size: int) -> np.ndarray:
    """`image` (H, W, 3) resized to size x size: area filter when shrinking, bilinear otherwise."""
    shrink = min(image.shape[:2]) > size
    return cv2.resize(image, (size, size), interpolation=cv2.INTER_AREA if shrink else cv2.INTER_LINEAR)


@dataclass(frozen=True)
class Geometry:
    """How a photo becomes a stored size x size image (a dataset's `geometry` and `crop_fraction`).

    `crop` keeps the photo's aspect: the centred square of `fraction` of its shorter side, resized
    (torchvision's Resize + CenterCrop; 0.875 is Resize 256 + CenterCrop 224, how Xiao et al. made
    the Background Challenge's images and the test geometry of ReBias and Ge et al.). `squash`
    resizes the whole photo to the square (BiasEnsemble's Resize((224, 224))).
    """

    kind: str = "crop"
    fraction: float = 1.0

    KINDS = ("crop", "squash")

    def __post_init__(self):
        if self.kind not in self.KINDS:
            raise ValueError(f"geometry {self.kind!r} is not one of {self.KINDS}")

    @classmethod
    def of(cls, ds_cfg: dict) -> Geometry:
        """A dataset section's geometry; `crop_fraction` may be left out (squash has none)."""
        return cls(ds_cfg["geometry"], float(ds_cfg.get("crop_fraction", cls.fraction)))

    def window(self, height: int, width: int, size: int | None = None) -> tuple[int, int, int] | None:
        """(top, left, side) of the square a height x width photo keeps (CenterCrop's rounding);
        None for `squash`, and for a photo that already is the stored size x size square (a
        released image, cut from its photo so already): all of it."""
        if self.kind == "squash" or (height, width) == (size, size):
            return None
        side = max(1, int(round(self.fraction * min(height, width))))
        return int(round((height - side) / 2)), int(round((width - side) / 2)), side

    def apply(self, image: np.ndarray, size: int) -> np.ndarray:
        """`image` (H, W, C) as size x size."""
        height, width = image.shape[:2]
        window = self.window(height, width, size)
        if window is not None:
            top, left, side = window
            image = image[top : top + side, left : left + side]
        return resize_square(image, size)


@dataclass(frozen=True)
class TrainPhotos:
    """A dataset's `train_views: photo`: its training images stored as the whole photo squashed to
    `side` x `side` (`view_source_size`), each with its aspect (width / height) beside it, so that
    the training views are cut from the photo in its own proportions (Ge et al.: RandomResizedCrop of
    the decoded photo, moco-non-sem-neg.py:247, main_lincls.py:250); `fraction` is the test
    geometry's crop (the view of a training photo scored as a test image)."""

    side: int
    fraction: float
    #: the section's setting that makes it, and the one that does not (for the config check's messages)
    SETTING: ClassVar[str] = "train_views: photo"
    UNSET: ClassVar[str] = "train_views: square"

    @classmethod
    def of(cls, ds_cfg: dict) -> TrainPhotos | None:
        """The section's photo views; None for `train_views: square` (or the key left out)."""
        if ds_cfg.get("train_views") != "photo":
            return None
        return cls(int(ds_cfg["view_source_size"]), Geometry.of(ds_cfg).fraction)

    def photo(self, image: np.ndarray) -> tuple[np.ndarray, float]:
        """The whole photo (H, W, 3) squashed to side x side, and its aspect W / H."""
        return resize_square(image, self.side), image.shape[1] / image.shape[0]


def unsquashed(image: np.ndarray, aspect: float, side: int | None = None) -> np.ndarray:
    """A photo stored squashed (`TrainPhotos.photo`) back at its aspect, its shorter side `side` (default:
    the stored side): Resize(side) of the photo, resampled from the stored square."""
    side = side or image.shape[0]
    size = (round(side * aspect), side) if aspect >= 1 else (side, round(side / aspect))  # (width, height)
    shrink = min(size) < image.shape[0]
    return cv2.resize(image, size, interpolation=cv2.INTER_AREA if shrink else cv2.INTER_LINEAR)


def _to_rgb(im: Image.Image) -> np.ndarray:
    if im.mode in ("RGBA", "LA", "PA") or (im.mode == "P" and "transparency" in im.info):
        rgba = np.asarray(im.convert("RGBA"), dtype=np.float32)
        alpha = rgba[..., 3:4] / 255.0
        return np.rint(rgba[..., :3] * alpha).astype(np.uint8)
    if im.mode in ("I;16", "I;16B", "I;16L", "I"):
        arr = np.asarray(im, dtype=np.float64)
        scale = 255.0 / max(float(arr.max()), 1.0)
        gray = np.rint(arr * scale).astype(np.uint8)
        return np.repeat(gray[..., None], 3, axis=2)
    return np.asarray(im.convert("RGB"), dtype=np.uint8).copy()
