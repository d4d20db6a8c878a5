"""IN-9-C: the val images under the ImageNet-C corruptions (Hendrycks & Dietterich, ICLR 2019),
through the `imagecorruptions-imaug` package (all 19: the 15 test and 4 validation corruptions,
severities 1-5, its constants unchanged).

Each val image appears once, under one (corruption, severity) pair; within a class the images
(in a seeded order) take the pairs in turn from a seeded offset, so every pair is used equally
often, to within one image, in every class. The store's accuracy therefore estimates the
ImageNet-C mean over corruptions and severities with one corrupted copy per image instead of
the 95 of the full product (which would be 95 times the images to build and to score).

The package draws its noise from numpy's global generator (and skimage's / its numba kernel's
own seeds for impulse noise and glass blur): each image seeds all of them from its id, so the
bytes do not depend on which shard or process corrupts it.
"""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np

from debias_workbench.core.errors import PipelineError, SkipItem
from debias_workbench.core.seeding import name_seed

#: the corruptions whose functions take their own seed rather than numpy's global one
OWN_SEED = ("impulse_noise", "glass_blur")
#: the package refuses smaller images
MIN_SIDE = 32


def corruption_names(selection: str | list[str]) -> list[str]:
    """`all` (19), `common` (the 15 of ImageNet-C's test set), `validation` (the 4 extra) or a list."""
    from imagecorruptions import get_corruption_names

    return list(get_corruption_names(selection)) if isinstance(selection, str) else list(selection)


def check_work_size(image_size: int, work_size: int | None) -> None:
    """The package refuses images under 32 px: say which setting to change."""
    if (work_size or image_size) < MIN_SIDE:
        raise PipelineError(
            f"the ImageNet-C corruptions need images of at least {MIN_SIDE} px, these are "
            f"{work_size or image_size} px: set datasets.<in9>.corrupted.work_size to {MIN_SIDE} or more"
        )


def assign_pairs(labels: np.ndarray, ids: np.ndarray, n_pairs: int, seed: int) -> np.ndarray:
    """(N,) index of each image's (corruption, severity) pair: per class, the images in the
    order of a hash of their ids take pairs offset, offset + 1, ... (mod n_pairs), with a
    per-class seeded offset; balanced per class to within one image."""
    pair = np.zeros(len(ids), np.int64)
    for label in np.unique(labels):
        members = np.nonzero(labels == label)[0]
        order = members[np.argsort([name_seed(seed, "corruption-order", ids[k]) for k in members], kind="stable")]
        offset = name_seed(seed, "corruption-offset", int(label)) % n_pairs
        pair[order] = (offset + np.arange(len(order))) % n_pairs
    return pair


def corrupt_image(
    image: np.ndarray, name: str, severity: int, image_id: str, seed: int, work_size: int | None
) -> np.ndarray:
    """`image` (H, W, 3) uint8 under `name` at `severity` (1-5), seeded by the image id; run at
    `work_size` (resized there and back) when given, else at the image's own size."""
    from imagecorruptions import corrupt

    side = image.shape[0]
    work = work_size or side
    x = image if work == side else cv2.resize(image, (work, work), interpolation=cv2.INTER_CUBIC)
    item_seed = name_seed(seed, "corruption", image_id, name, severity) % 2**32
    np.random.seed(item_seed)  # the package's draws come from numpy's global generator
    kwargs: dict[str, Any] = {"seed": item_seed} if name in OWN_SEED else {}
    try:
        y = corrupt(x, severity=int(severity), corruption_name=name, **kwargs)
    except Exception as exc:  # noqa: BLE001 - any failure of a corruption is this image's, recorded in the manifest
        raise SkipItem(f"{name} (severity {severity}) failed: {type(exc).__name__}: {exc}") from exc
    y = np.asarray(y, np.uint8)[..., :3]
    if y.shape[:2] != (work, work):  # a few corruptions round the size (e.g. through PIL)
        y = cv2.resize(y, (work, work), interpolation=cv2.INTER_AREA)
    return y if work == side else cv2.resize(y, (side, side), interpolation=cv2.INTER_AREA)
