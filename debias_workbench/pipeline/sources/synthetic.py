"""The embedded "ImageNet-9-like" source: 9 classes told apart by the *shape* of the object.

Every image is a textured background of one of 9 kinds with one solid-coloured object on
it. The object's shape is the class; its colour, size, position and rotation are random,
so only shape identifies it. Background kind k is the "home" background of class k: an
image of class y gets kind y with probability `bg_correlation`, otherwise one of the other
8 kinds uniformly - the strong-but-imperfect correlation that makes photographs'
backgrounds a shortcut. A classifier that uses the shortcut loses accuracy on MIXED_RAND.

Written like the Background-Challenge release: `original/<split>/<NN_class>/<stem>.JPEG`,
`annotations/<split>/<NN_class>/<stem>.xml` (VOC boxes from the true mask) and
`fg_mask/<split>/<NN_class>/<stem>.png` (true masks, 0/255). Each image's randomness is
seeded from its own name, so the set is identical however it is produced.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from PIL import Image

from debias_workbench.core.seeding import name_rng

from ..annotations import write_voc_xml

SHAPES = ("disk", "square", "triangle", "star", "cross", "ring", "crescent", "ell", "tee")
BACKGROUNDS = ("hstripes", "vstripes", "diagonal", "checker", "dots", "grid", "rings", "blobs", "speckle")


def make_synthetic_in9(out_dir: Path, cfg: dict[str, Any], classes: list[str], seed: int) -> None:
    """Write the whole source set to `out_dir` (which must not exist yet)."""
    size = int(cfg["image_size"])
    for split, per_class in (("train", cfg["train_per_class"]), ("val", cfg["val_per_class"])):
        for label, cls in enumerate(classes):
            for i in range(int(per_class)):
                stem = f"syn_{split}_{label}_{i:05d}"
                rng = name_rng(seed, "synthetic", split, cls, stem)
                image, mask, bg_kind = render_sample(label, size, float(cfg["bg_correlation"]), rng)
                img_path = out_dir / "original" / split / cls / f"{stem}.JPEG"
                img_path.parent.mkdir(parents=True, exist_ok=True)
                Image.fromarray(image).save(img_path, quality=int(cfg["jpeg_quality"]))
                mask_path = out_dir / "fg_mask" / split / cls / f"{stem}.png"
                mask_path.parent.mkdir(parents=True, exist_ok=True)
                Image.fromarray(mask * 255).save(mask_path)
                ys, xs = np.nonzero(mask)
                box = (int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1)
                box = _loosen(box, size, rng)
                write_voc_xml(
                    out_dir / "annotations" / split / cls / f"{stem}.xml",
                    img_path.name,
                    size,
                    size,
                    f"{cls}:{BACKGROUNDS[bg_kind]}",
                    [box],
                )


def render_sample(
    label: int, size: int, bg_correlation: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, int]:
    """One (image, mask, background kind) for class `label`."""
    if rng.random() < bg_correlation:
        bg_kind = label
    else:
        bg_kind = int(rng.choice([k for k in range(len(BACKGROUNDS)) if k != label]))
    c1, c2 = rng.integers(0, 256, size=(2, 3))
    background = render_background(bg_kind, size, c1, c2, rng)
    mask = render_shape(label, size, rng)
    colour = _distinct_colour(rng, (c1, c2))
    noise = rng.normal(0.0, 6.0, size=(size, size, 3))
    obj = np.clip(colour[None, None, :] + noise, 0, 255)
    m = mask[..., None].astype(np.float64)
    image = np.rint(background * (1 - m) + obj * m).astype(np.uint8)
    return image, mask, bg_kind


def render_background(kind: int, size: int, c1: np.ndarray, c2: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A two-colour texture of the given kind, with random period and phase."""
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float64)
    period = rng.uniform(0.08, 0.16) * size
    phase = rng.uniform(0, 2 * math.pi)
    name = BACKGROUNDS[kind]
    if name == "hstripes":
        t = np.sin(2 * math.pi * yy / period + phase) > 0
    elif name == "vstripes":
        t = np.sin(2 * math.pi * xx / period + phase) > 0
    elif name == "diagonal":
        t = np.sin(2 * math.pi * (xx + yy) / (period * 1.4) + phase) > 0
    elif name == "checker":
        t = (np.floor(xx / period + phase) + np.floor(yy / period + phase)) % 2 > 0
    elif name == "dots":
        cx = (xx + phase * period) % period - period / 2
        cy = (yy + phase * period) % period - period / 2
        t = cx**2 + cy**2 < (period * 0.3) ** 2
    elif name == "grid":
        t = ((xx + phase * period) % period < period * 0.25) | ((yy + phase * period) % period < period * 0.25)
    elif name == "rings":
        cx, cy = rng.uniform(0, size, 2)
        t = np.sin(2 * math.pi * np.hypot(xx - cx, yy - cy) / period + phase) > 0
    elif name == "blobs":
        coarse = rng.random((5, 5))
        t = cv2.resize(coarse, (size, size), interpolation=cv2.INTER_CUBIC) > 0.5
    else:  # speckle
        t = rng.random((size, size)) < 0.5
    t = t[..., None]
    return np.where(t, c1[None, None, :], c2[None, None, :]).astype(np.float64)


def render_shape(label: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """A binary (size, size) mask of class `label`'s shape at random scale, place and angle."""
    r = rng.uniform(0.22, 0.32) * size  # "radius" of the shape's bounding circle
    cx, cy = rng.uniform(r + 1, size - r - 1, 2)
    angle = rng.uniform(-math.pi / 6, math.pi / 6)  # mostly upright, as objects in photographs
    name = SHAPES[label]
    mask = np.zeros((size, size), np.uint8)
    if name in ("disk", "ring", "crescent"):
        cv2.circle(mask, (round(cx), round(cy)), round(r), 1, -1)
        if name == "ring":
            cv2.circle(mask, (round(cx), round(cy)), round(r * 0.55), 0, -1)
        elif name == "crescent":
            off = np.array([math.cos(angle), math.sin(angle)]) * r * 0.55
            cv2.circle(mask, (round(cx + off[0]), round(cy + off[1])), round(r * 0.85), 0, -1)
        return mask
    shapes: dict[str, list[list[tuple[float, float]]]] = {
        "square": [[(-0.7, -0.7), (0.7, -0.7), (0.7, 0.7), (-0.7, 0.7)]],
        "triangle": [[(0, -1), (0.87, 0.5), (-0.87, 0.5)]],
        "star": [
            [
                (math.cos(a) * rad, math.sin(a) * rad)
                for a, rad in ((-math.pi / 2 + k * math.pi / 5, 1.0 if k % 2 == 0 else 0.42) for k in range(10))
            ]
        ],
        "cross": [[(-1, -0.3), (1, -0.3), (1, 0.3), (-1, 0.3)], [(-0.3, -1), (0.3, -1), (0.3, 1), (-0.3, 1)]],
        "ell": [[(-0.7, -1), (-0.15, -1), (-0.15, 0.45), (0.7, 0.45), (0.7, 1), (-0.7, 1)]],
        "tee": [
            [
                (-0.9, -0.9),
                (0.9, -0.9),
                (0.9, -0.35),
                (0.28, -0.35),
                (0.28, 1),
                (-0.28, 1),
                (-0.28, -0.35),
                (-0.9, -0.35),
            ]
        ],
    }
    polys = shapes[name]
    rot = np.array([[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]])
    for poly in polys:
        pts = (np.array(poly) @ rot.T) * r + np.array([cx, cy])
        cv2.fillPoly(mask, [np.rint(pts).astype(np.int32)], 1)
    return mask


def _distinct_colour(rng: np.random.Generator, avoid: tuple[np.ndarray, ...]) -> np.ndarray:
    """A random colour at L1 distance >= 150 from the background colours (visible object)."""
    for _ in range(100):
        colour = rng.integers(0, 256, size=3)
        if all(np.abs(colour - a).sum() >= 150 for a in avoid):
            return colour.astype(np.float64)
    return (255 - avoid[0]).astype(np.float64)


def _loosen(box: tuple[int, int, int, int], size: int, rng: np.random.Generator) -> tuple[int, int, int, int]:
    """Annotators' boxes are a little loose: grow each side by 0-2 pixels."""
    pad = rng.integers(0, 3, size=4)
    return (max(0, box[0] - pad[0]), max(0, box[1] - pad[1]), min(size, box[2] + pad[2]), min(size, box[3] + pad[3]))
