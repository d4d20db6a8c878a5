"""The two example patches an IN-9-Texture image is synthesized from (Ge et al. 2021 Sec. 2.2): the image
they are cut from (the stored square, or under `train_views: photo` a training row's whole photo), their side
(the authors' `patch` / `small_patch` of the photo, scaled to the work image) and where they are cut (the
centre and one uniformly random position). `derived_stage` synthesizes the texture from them."""

from __future__ import annotations

from typing import Any

import numpy as np
import zarr

from .imageio import TrainPhotos


def patch_sides(side: int, cfg: dict[str, Any]) -> int:
    """Side of the two example patches: `patch` (96), `small_patch` (48) when the image is under
    two patches wide, half the image when it is under two small patches wide."""
    for p in (int(cfg["patch"]), int(cfg["small_patch"])):
        if side >= 2 * p:
            return p
    return max(2, side // 2)


def work_patch_side(source_side: int, work: int, cfg: dict[str, Any]) -> int:
    """The example patches' side in a `work`-px image of a photo whose shorter side was
    `source_side` px: `patch_sides` of the photo, scaled, so a patch covers the share of the
    object the authors' patches cut from the photo cover (a 96-px patch of a 350-px photo is
    61 px of a 224-px store, not 96)."""
    return max(2, min(work // 2, round(patch_sides(source_side, cfg) * work / source_side)))


def example_patches(image: np.ndarray, p: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The central p x p patch of `image` (H, W, 3) and one p x p patch at a uniformly random position."""
    height, width = image.shape[:2]
    cy, cx = (height - p) // 2, (width - p) // 2
    y, x = rng.integers(0, np.array([height - p + 1, width - p + 1]))
    return image[cy : cy + p, cx : cx + p], image[y : y + p, x : x + p]


#: a row's example image: the stored square (aspect None) or a training photo squashed, with its aspect
Example = tuple[np.ndarray, float | None]


def texture_examples(
    seg: zarr.Group, rows: np.ndarray, images: np.ndarray, ds_cfg: dict[str, Any]
) -> tuple[list[Example], np.ndarray]:
    """(the image each row's example patches are cut from, the photo pixels its shorter side spans):
    the stored square (`images`) and `source_sides`; under `train_views: photo` a training row's whole
    photo (`photos`, squashed, with its aspect) and the photo's shorter side."""
    examples: list[Example] = [(image, None) for image in images]
    sides = seg["source_sides"][:][rows]
    if TrainPhotos.of(ds_cfg) is None:
        return examples, sides
    shapes = seg["photo_shapes"][:][rows]
    for k in np.nonzero(seg["splits"][:][rows] == "train")[0]:
        height, width = shapes[k]
        examples[k], sides[k] = (seg["photos"][int(rows[k])], width / height), min(height, width)
    return examples, sides
