"""Foreground segmentation: GrabCut from bounding boxes (the Background Challenge's method)
or U2-Net through rembg, with explicit handling of empty and full masks; or `none`, for datasets
whose variants need no foreground (ImageNet-100: original, stylized, texture, corrupted), where
the mask is the box itself.

Images without a bounding box use the *fallback box*: a centred rectangle covering
`fallback_box_fraction` of each side (ImageNet objects are mostly centred). Every mask
records how it was obtained (`mask_status`) so the quality report can show it.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from debias_workbench.core.errors import PipelineError
from debias_workbench.core.provenance import file_digest

from .annotations import Box

U2NETP_MD5 = "8e83ca70e441ab06c318d82300c84806"


@dataclass(frozen=True)
class Segmentation:
    mask: np.ndarray  # (H, W) uint8 in {0, 1}
    status: str  # "ok", "empty->box" (nothing found: the box is used) or "full" (everything is foreground)


def fallback_box(width: int, height: int, fraction: float) -> Box:
    """Centred box covering `fraction` of each side."""
    mx, my = round(width * (1 - fraction) / 2), round(height * (1 - fraction) / 2)
    return (mx, my, width - mx, height - my)


def boxes_mask(boxes: list[Box], height: int, width: int) -> np.ndarray:
    """(H, W) uint8 mask, 1 inside any box."""
    mask = np.zeros((height, width), np.uint8)
    for x0, y0, x1, y1 in boxes:
        mask[y0:y1, x0:x1] = 1
    return mask


def grabcut(image: np.ndarray, boxes: list[Box], iterations: int, seed: int) -> Segmentation:
    """GrabCut (Rother et al. 2004) initialised from the union of `boxes`.

    Outside every box is certain background, inside is probable foreground - the same as
    OpenCV's rectangle initialisation, extended to several boxes. When the boxes cover the
    whole image there is no background sample, so the 1-pixel border becomes probable
    background. OpenCV's k-means initialisation draws from a per-thread RNG: it is
    re-seeded from the image's name so masks do not depend on which worker ran them.
    """
    height, width = image.shape[:2]
    inside = boxes_mask(boxes, height, width).astype(bool)
    init = np.where(inside, cv2.GC_PR_FGD, cv2.GC_BGD).astype(np.uint8)
    if inside.all():
        init[[0, -1], :] = cv2.GC_PR_BGD
        init[:, [0, -1]] = cv2.GC_PR_BGD
    bgd, fgd = np.zeros((1, 65), np.float64), np.zeros((1, 65), np.float64)
    cv2.setRNGSeed(seed & 0x7FFFFFFF)
    bgr = np.ascontiguousarray(image[..., ::-1])
    try:
        # OpenCV takes no rectangle (None) with GC_INIT_WITH_MASK; its stubs ask for one
        cv2.grabCut(bgr, init, None, bgd, fgd, iterations, cv2.GC_INIT_WITH_MASK)  # type: ignore[call-overload]
    except cv2.error:
        # GrabCut cannot fit its colour models (e.g. a single-colour image): keep the box.
        return Segmentation(inside.astype(np.uint8), "empty->box")
    mask = np.isin(init, (cv2.GC_FGD, cv2.GC_PR_FGD)).astype(np.uint8)
    return _checked(mask, inside)


def _checked(mask: np.ndarray, inside: np.ndarray) -> Segmentation:
    if not mask.any():
        return Segmentation(inside.astype(np.uint8), "empty->box")
    if mask.all():
        return Segmentation(mask, "full")
    return Segmentation(mask, "ok")


class U2NetSegmenter:
    """U2-Net saliency through rembg, from a local model file only (never downloaded).

    `model_path` is a `u2netp.onnx` / `u2net.onnx` file; it is verified and exposed to
    rembg through `U2NET_HOME` so rembg finds it instead of fetching one.
    """

    def __init__(self, model_path: str | None, threshold: float = 0.5):
        path = Path(model_path or Path(os.environ.get("U2NET_HOME", "~/.u2net")) / "u2netp.onnx").expanduser()
        if not path.is_file():
            raise PipelineError(
                f"U2-Net model not found at {path}. Place u2netp.onnx (4,574,861 bytes, md5 {U2NETP_MD5}) there, "
                "or set `segmentation.u2net_model` to its path, or use `segmentation.method: grabcut`. "
                "Nothing is downloaded at run time."
            )
        name = path.stem
        if name == "u2netp" and file_digest(path, "md5") != U2NETP_MD5:
            raise PipelineError(
                f"{path} does not have the md5 of u2netp.onnx ({U2NETP_MD5}); replace it with an intact copy"
            )
        os.environ["U2NET_HOME"] = str(path.parent)
        with _numba_compilation_off():
            from rembg import new_session  # imported late: rembg is an optional dependency

        self._session = new_session(name)
        self.threshold = threshold

    def __call__(self, image: np.ndarray, boxes: list[Box]) -> Segmentation:
        from PIL import Image

        (prob,) = self._session.predict(Image.fromarray(image))
        mask = (np.asarray(prob, np.float32) / 255.0 >= self.threshold).astype(np.uint8)
        height, width = image.shape[:2]
        return _checked(mask, boxes_mask(boxes, height, width).astype(bool))


@contextlib.contextmanager
def _numba_compilation_off() -> Iterator[None]:
    """numba's JIT off while rembg is imported: rembg imports pymatting, whose alpha-matting kernels
    (never called here) numba compiles as they are defined, the first time in an environment for about
    a CPU-minute. numba reads NUMBA_DISABLE_JIT when a function is decorated and again before each
    compilation, so the kernels decorated inside stay plain Python and any compiled later is compiled."""
    previous = os.environ.get("NUMBA_DISABLE_JIT")
    os.environ["NUMBA_DISABLE_JIT"] = "1"
    _reload_numba_config()
    try:
        yield
    finally:
        if previous is None:
            del os.environ["NUMBA_DISABLE_JIT"]
        else:
            os.environ["NUMBA_DISABLE_JIT"] = previous
        _reload_numba_config()


def _reload_numba_config() -> None:
    """numba's settings read anew from the environment, where numba is already imported."""
    if "numba" in sys.modules:
        sys.modules["numba"].config.reload_config()


def box_only(image: np.ndarray, boxes: list[Box]) -> Segmentation:
    """No segmentation: the mask is the union of the boxes (the XML boxes, else the centred
    fallback box; `fallback_box_fraction: 1` makes it the whole image). The variants built from
    such a dataset must not depend on a foreground (workbench.config rejects them)."""
    height, width = image.shape[:2]
    return Segmentation(boxes_mask(boxes, height, width), "box")


def make_segmenter(cfg: dict[str, Any]):
    """A callable (image, boxes, seed) -> Segmentation for the configured method."""
    if cfg["method"] == "none":
        return lambda image, boxes, seed: box_only(image, boxes)
    if cfg["method"] == "grabcut":
        iterations = int(cfg["iterations"])
        return lambda image, boxes, seed: grabcut(image, boxes, iterations, seed)
    u2net = U2NetSegmenter(cfg.get("u2net_model"), float(cfg.get("u2net_threshold", 0.5)))
    return lambda image, boxes, seed: u2net(image, boxes)
