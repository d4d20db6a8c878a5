"""Decoding source images into RGB uint8 arrays, with a clear reason for every rejection."""

from __future__ import annotations

import warnings
from pathlib import Path

import cv2
import numpy as np
from PIL import Image, UnidentifiedImageError

from core.errors import SkipItem

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


#: how a photo becomes a stored size x size image: `crop` keeps its aspect (the largest square,
#: resized: torchvision's Resize(size) + CenterCrop(size), the test geometry of CLAD, Ge et al.
#: and the Background Challenge); `squash` resizes the whole photo to the square (BiasEnsemble's
#: and Park et al.'s Resize((224, 224)))
GEOMETRIES = ("crop", "squash")


def square_window(height: int, width: int, centre: tuple[float, float] | None = None) -> tuple[int, int, int]:
    """(top, left, side) of the largest square of a height x width image, centred on `centre`
    (x, y in pixels; None: the image's centre) along the longer side and kept inside the image."""
    side = min(height, width)
    cx, cy = centre if centre is not None else (width / 2, height / 2)
    top = int(np.clip(round(cy - side / 2), 0, height - side))
    left = int(np.clip(round(cx - side / 2), 0, width - side))
    return top, left, side


def to_square(image: np.ndarray, size: int, geometry: str, centre: tuple[float, float] | None = None) -> np.ndarray:
    """`image` (H, W, C) as size x size under `geometry` (see GEOMETRIES); `crop` takes the
    `square_window` around `centre`."""
    if geometry == "squash":
        return resize_square(image, size)
    if geometry != "crop":
        raise ValueError(f"geometry {geometry!r} is not one of {GEOMETRIES}")
    top, left, side = square_window(*image.shape[:2], centre)
    return resize_square(image[top:top + side, left:left + side], size)


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
