"""The Background Challenge's image variants (Xiao et al., ICLR 2021), as pure array functions.

Notation: `image` (H, W, 3) uint8, `fg` the binary foreground mask m, `box` the binary
union of the bounding boxes. MIXED_* composite as x = bg * (1 - m) + image * m, with bg
the ONLY_BG_T image of another sample chosen by `choose_partner`.
"""

from __future__ import annotations

import cv2
import numpy as np

from debias_workbench.core.errors import SkipItem

VARIANTS = (
    "original",
    "only_fg",
    "no_fg",
    "only_bg_b",
    "only_bg_t",
    "mixed_same",
    "mixed_rand",
    "mixed_next",
    "sketch",
    "mixed_rand_heldout",
)
#: the suffix of a variant composed as its base variant whose val split is instead a share of its train rows held
#: out of its train split (`heldout_splits`): the bias-free reference of the methods x benchmarks table, decided on
#: images its reference run never trains on and no comparison is scored on (the table's other runs train on them,
#: and an ImageNet-pretrained reference saw them in pre-training: papers/matrix/)
HELDOUT = "_heldout"
#: the share of each class's train rows a `HELDOUT` variant holds out as its val split (`held_out_count`)
HELDOUT_FRACTION = 0.1


def held_out_count(n: int) -> int:
    """Rows held out of a class's `n` training rows: round(`HELDOUT_FRACTION` x n), at least one where the class
    has two (so that a small dataset, a smoke run's, still has a held-out split), none of a class of one."""
    return max(int(round(HELDOUT_FRACTION * n)), int(n >= 2))


MIXED = ("mixed_same", "mixed_rand", "mixed_next", "mixed_rand_heldout")
#: Variants whose picture contains this sample's foreground at its mask: they store `masks`.
WITH_FOREGROUND = ("original", "only_fg", "no_fg", "mixed_same", "mixed_rand", "mixed_next", "mixed_rand_heldout")
#: Variants whose picture is made from the foreground mask (with the `bg_conflict_<p>` ones): a
#: dataset built with `segmentation.method: none` (mask = box) cannot build them.
NEEDS_FOREGROUND = ("only_fg", "no_fg", "mixed_same", "mixed_rand", "mixed_next", "sketch", "mixed_rand_heldout")
#: Test sets read from the user's folders as released, val split only (`external` of an in9
#: dataset): ImageNet-Sketch (Wang et al. 2019) and ImageNet-R (Hendrycks et al. 2021).
EXTERNAL = ("imagenet_sketch", "imagenet_r")


def heldout_splits(splits: np.ndarray, ids: np.ndarray, labels: np.ndarray, seed: int) -> np.ndarray:
    """The split of each row in a `HELDOUT` variant: of each class's train rows, `held_out_count` of them
    (ordered by a hash of their ids, so by name, not by row order) become "val", the rest stay "train"; the
    dataset's own val rows are left out (""), so the variant shares no image with any other variant's val split."""
    from debias_workbench.core.seeding import name_seed

    out = np.where(splits == "train", "train", "").astype(object)
    for y in np.unique(labels[splits == "train"]):
        members = np.flatnonzero((splits == "train") & (labels == y))
        members = members[np.argsort([name_seed(seed, "heldout", ids[k]) for k in members], kind="stable")]
        out[members[: held_out_count(len(members))]] = "val"
    return out


def only_fg(image: np.ndarray, fg: np.ndarray) -> np.ndarray:
    return image * fg[..., None]


def no_fg(image: np.ndarray, fg: np.ndarray) -> np.ndarray:
    return image * (1 - fg[..., None])


def only_bg_b(image: np.ndarray, box: np.ndarray) -> np.ndarray:
    return image * (1 - box[..., None])


def only_bg_t(image: np.ndarray, box: np.ndarray) -> tuple[np.ndarray, str]:
    """Fill the box region by tiling the largest background strip left beside it.

    The strips are the full-width bands above and below the boxes' bounding rectangle and
    the full-height bands left and right of it; the largest (first in that order on ties)
    is tiled from the top-left corner over the whole image and shows through the boxes.
    If the boxes cover the whole image there is nothing to tile: the box region is filled
    with the mean colour of the image and the status says so.
    """
    if not box.any():
        return image.copy(), "ok"
    ys, xs = np.nonzero(box)
    y0, y1, x0, x1 = ys.min(), ys.max() + 1, xs.min(), xs.max() + 1
    height, width = box.shape
    strips = [image[:y0], image[y1:], image[:, :x0], image[:, x1:]]
    strip = max(strips, key=lambda s: s.shape[0] * s.shape[1])
    out = image.copy()
    if strip.size == 0:
        out[box.astype(bool)] = np.rint(image.reshape(-1, 3).mean(axis=0)).astype(np.uint8)
        return out, "no background left: box filled with the mean colour"
    reps = (-(-height // strip.shape[0]), -(-width // strip.shape[1]), 1)
    tiled = np.tile(strip, reps)[:height, :width]
    inside = box.astype(bool)
    out[inside] = tiled[inside]
    return out, "ok"


def sketch(image: np.ndarray, fg: np.ndarray) -> np.ndarray:
    """A stand-in for IN-9-Sketch (ImageNet-Sketch is not available offline): the foreground's
    outline and inner edges (Canny on the foreground alone) drawn black on white, for a batch
    (N, H, W, 3). It keeps shape and removes texture and colour, as a drawing does; it is not
    a drawing, and the report labels it as a stand-in."""
    out = np.full_like(image, 255)
    kernel = np.ones((3, 3), np.uint8)
    for k, (im, m) in enumerate(zip(image, fg)):
        gray = cv2.cvtColor(im * m[..., None], cv2.COLOR_RGB2GRAY)
        lines = (cv2.Canny(gray, 50, 150) > 0) | (cv2.morphologyEx(m, cv2.MORPH_GRADIENT, kernel) > 0)
        out[k][lines] = 0
    return out


def composite(background: np.ndarray, image: np.ndarray, fg: np.ndarray) -> np.ndarray:
    """x = bg * (1 - m) + image * m."""
    m = fg[..., None]
    return background * (1 - m) + image * m


#: prefix of the background-biased variants (a Waterbirds analogue): `bg_conflict_<percent>`
BG_CONFLICT = "bg_conflict_"


def bg_conflict_variants(percents: list[float]) -> list[str]:
    return [f"{BG_CONFLICT}{p:g}" for p in percents]


def background_classes(labels: np.ndarray, ids: np.ndarray, n_classes: int, ratio: float, seed: int) -> np.ndarray:
    """Class of the background each image's foreground goes onto, for the background-biased
    variants: per class y, round(ratio * n_y) images (chosen by a hash of their ids) take the
    other classes in turn from a seeded order (counts over them differ by at most one), the
    others class y. The split's bias-conflicting share is then exact per class."""
    from debias_workbench.core.seeding import name_rng, name_seed

    out = labels.astype(np.int64).copy()
    for y in np.unique(labels):
        members = np.flatnonzero(labels == y)
        members = members[np.argsort([name_seed(seed, "bg-conflict-order", ids[k]) for k in members], kind="stable")]
        n_conflict = int(round(ratio * len(members)))
        others = name_rng(seed, "bg-conflict-classes", int(y)).permutation([c for c in range(n_classes) if c != y])
        out[members[:n_conflict]] = others[np.arange(n_conflict) % len(others)]
    return out


def choose_partner(
    variant: str,
    label: int,
    self_index: int,
    by_class: list[np.ndarray],
    rng: np.random.Generator,
    background_class: int = -1,
) -> int:
    """Index of the sample whose ONLY_BG_T background this sample's foreground goes onto.

    MIXED_SAME: another image of the same class. MIXED_RAND: a class drawn uniformly from
    all classes, then an image of it (not this one). MIXED_NEXT: an image of class
    (y + 1) mod C. `bg_conflict_<p>`: an image of `background_class` (from
    `background_classes`). `by_class[c]` holds the candidate indices of class c in this split.
    """
    n_classes = len(by_class)
    if variant.startswith(BG_CONFLICT):
        cls = background_class
    elif variant == "mixed_same":
        cls = label
    elif variant in ("mixed_rand", "mixed_rand_heldout"):
        cls = int(rng.integers(n_classes))
    elif variant == "mixed_next":
        cls = (label + 1) % n_classes
    else:
        raise ValueError(variant)
    candidates = by_class[cls][by_class[cls] != self_index]
    if candidates.size == 0:
        raise SkipItem(f"{variant}: no other image of class index {cls} in this split to take a background from")
    return int(candidates[rng.integers(candidates.size)])
