"""Waterbirds (Sagawa et al., ICLR 2020, the group-DRO recipe) from folders the user supplies:
CUB-200-2011 birds cut out with CUB's segmentations and pasted on Places backgrounds.

- Label: waterbird (1) when the CUB species is one of the seabird / waterfowl families of the
  recipe (`WATER_FAMILIES`), else landbird (0).
- Bias label: the background's place type, land (0: bamboo forest, broadleaf forest) or water
  (1: ocean, natural lake), each image's place drawn from the two categories of its type.
- Splits: CUB's own train / test split; `val_fraction` of the training images (per label, seeded)
  become val. Train: exactly round(p * n_y) images of each label on the other place type (the
  recipe's confounder 0.95 is p = 5 %); val and test: half of each label on each type.
- Compositing: the Places image centre-cropped to the bird image's aspect ratio and resized to
  it, then bird * m + place * (1 - m) with m the segmentation in [0, 1]; the result made
  `image_size` square under the dataset's `geometry` (squash by default, as the authors' Resize((224, 224))).
  Every choice is seeded by the image's id.
Nothing is downloaded: a missing file or folder stops with its path and what to place there.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from debias_workbench.core.errors import PipelineError, SkipItem
from debias_workbench.core.seeding import name_rng, name_seed

from .imageio import MIN_PICTURE_SIDE, Geometry, is_image_name, load_rgb

#: CUB species (folder names like 045.Northern_Fulmar) whose words name a waterbird family
WATER_FAMILIES = (
    "Albatross",
    "Auklet",
    "Cormorant",
    "Frigatebird",
    "Fulmar",
    "Gull",
    "Jaeger",
    "Kittiwake",
    "Pelican",
    "Puffin",
    "Tern",
    "Gadwall",
    "Grebe",
    "Mallard",
    "Merganser",
    "Guillemot",
    "Pacific_Loon",
)
#: Places365 categories of each place type (land, water), as paths under the Places root
PLACES = (("b/bamboo_forest", "f/forest/broadleaf"), ("o/ocean", "l/lake/natural"))
CUB_FILES = ("images.txt", "train_test_split.txt")


@dataclass(frozen=True)
class Bird:
    id: str  # CUB's relative image path, e.g. 045.Northern_Fulmar/Northern_Fulmar_0001_...jpg
    label: int  # 1 waterbird, 0 landbird
    cub_train: bool


def is_waterbird(species_folder: str) -> bool:
    return any(family.lower() in species_folder.lower() for family in WATER_FAMILIES)


def list_birds(cub_root: Path) -> list[Bird]:
    """Every image of CUB's images.txt with its label and CUB split, in id order."""
    for name in CUB_FILES:
        if not (cub_root / name).is_file():
            raise PipelineError(
                f"{cub_root / name} is missing: point `cub_root` at the extracted CUB_200_2011 folder "
                "(it holds images/, images.txt and train_test_split.txt)"
            )
    paths = _id_table(cub_root / "images.txt", "<image id> <species folder>/<file>.jpg")
    train = _id_table(cub_root / "train_test_split.txt", "<image id> <1 = train, 0 = test>")
    if paths.keys() != train.keys():
        odd = sorted(paths.keys() ^ train.keys(), key=lambda k: (len(k), k))
        raise PipelineError(
            f"{cub_root / 'images.txt'} and {cub_root / 'train_test_split.txt'} list different image "
            f"ids ({len(odd)} in one only, e.g. {odd[:3]}); restore both from CUB_200_2011.tgz"
        )
    if bad := [key for key, flag in train.items() if flag not in ("0", "1")][:3]:
        raise PipelineError(
            f"{cub_root / 'train_test_split.txt'}: image ids {bad} have a split flag other than 0 or 1; "
            "restore it from CUB_200_2011.tgz"
        )
    birds = [Bird(path, int(is_waterbird(path.split("/")[0])), train[key] == "1") for key, path in paths.items()]
    return sorted(birds, key=lambda b: b.id)


def _id_table(path: Path, layout: str) -> dict[str, str]:
    """{first field: second field} of a CUB list file of `layout` lines; a malformed or empty file
    is a `PipelineError` naming it and the line."""
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise PipelineError(
            f"cannot read {path} ({type(exc).__name__}: {exc}); restore it from CUB_200_2011.tgz"
        ) from exc
    table: dict[str, str] = {}
    for number, line in enumerate(lines, start=1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 2 or fields[0] in table:
            raise PipelineError(
                f"{path}, line {number}: {line[:80]!r} is not a '{layout}' line with a new id; "
                "restore the file from CUB_200_2011.tgz"
            )
        table[fields[0]] = fields[1]
    if not table:
        raise PipelineError(f"{path} lists no images; restore it from CUB_200_2011.tgz")
    return table


def list_places(places_root: Path) -> tuple[list[Path], list[Path]]:
    """(land, water) background images, each sorted."""
    out = []
    for categories in PLACES:
        files = []
        for category in categories:
            folder = places_root / category
            if not folder.is_dir():
                raise PipelineError(
                    f"{folder} is missing: point `places_root` at a Places365 folder with the "
                    f"categories {[c for t in PLACES for c in t]} (e.g. data_large/)"
                )
            files += sorted(p for p in folder.iterdir() if is_image_name(p))
        if not files:
            raise PipelineError(f"no images in {[str(places_root / c) for c in categories]}")
        out.append(files)
    return out[0], out[1]


def split_birds(birds: list[Bird], val_fraction: float, seed: int) -> dict[str, list[Bird]]:
    """CUB's test images are the test split; of its training images, a seeded `val_fraction` of
    each label is val."""
    out: dict[str, list[Bird]] = {"train": [], "val": [], "test": [b for b in birds if not b.cub_train]}
    for label in (0, 1):
        members = [b for b in birds if b.cub_train and b.label == label]
        order = name_rng(seed, "waterbirds_val", label).permutation(len(members))
        n_val = int(round(val_fraction * len(members)))
        out["val"] += [members[k] for k in order[:n_val]]
        out["train"] += [members[k] for k in order[n_val:]]
    return {split: sorted(items, key=lambda b: b.id) for split, items in out.items()}


def place_types(birds: list[Bird], other_share: float, seed: int, name: str) -> np.ndarray:
    """(N,) place type per bird: per label y, exactly round(other_share * n_y) birds (by a hash of
    their ids) on the other type, the rest on type y."""
    labels = np.array([b.label for b in birds])
    out = labels.copy()
    for y in (0, 1):
        members = np.flatnonzero(labels == y)
        members = members[np.argsort([name_seed(seed, name, birds[k].id) for k in members], kind="stable")]
        out[members[: int(round(other_share * len(members)))]] = 1 - y
    return out


def composite_bird(
    cub_root: Path, segmentations: Path, bird: Bird, place: Path, size: int, geometry: Geometry
) -> np.ndarray:
    """The bird on `place`, made size x size under `geometry` (see the module docstring)."""
    image = load_rgb(cub_root / "images" / bird.id, MIN_PICTURE_SIDE).astype(np.float32)
    mask_path = (segmentations / bird.id).with_suffix(".png")
    if not mask_path.is_file():
        raise SkipItem(f"no segmentation {mask_path}; extract CUB's segmentations.tgz into `segmentations`")
    mask = cv2.imread(str(mask_path), cv2.IMREAD_GRAYSCALE)
    if mask is None or mask.shape != image.shape[:2]:
        raise SkipItem(f"segmentation {mask_path} is unreadable or not the size of its image")
    m = mask.astype(np.float32)[..., None] / 255.0
    if m.max() == 0:
        raise SkipItem(f"segmentation {mask_path} is empty (no bird pixels)")
    background = crop_to(load_rgb(place, MIN_PICTURE_SIDE), image.shape[1], image.shape[0]).astype(np.float32)
    return geometry.apply(np.rint(image * m + background * (1 - m)).astype(np.uint8), size)


def crop_to(image: np.ndarray, width: int, height: int) -> np.ndarray:
    """The largest centred crop of `image` with the aspect ratio width:height, resized to it."""
    h, w = image.shape[:2]
    scale = min(w / width, h / height)
    cw, ch = int(round(width * scale)), int(round(height * scale))
    x, y = (w - cw) // 2, (h - ch) // 2
    crop = image[y : y + ch, x : x + cw]
    return cv2.resize(crop, (width, height), interpolation=cv2.INTER_AREA if scale > 1 else cv2.INTER_LINEAR)


def make_split(
    cfg: dict[str, Any], birds: list[Bird], other_share: float, seed: int, name: str
) -> tuple[dict[str, np.ndarray], list[dict[str, Any]]]:
    """Arrays (images, labels, bias_labels, ids) of `birds` on backgrounds with `other_share` of
    each label on the other place type, and the skipped items with their reasons."""
    cub_root, places_root = Path(cfg["cub_root"]).expanduser(), Path(cfg["places_root"]).expanduser()
    segmentations = Path(cfg["segmentations"]).expanduser()
    places = list_places(places_root)
    types = place_types(birds, other_share, seed, name)
    size = int(cfg["image_size"])
    images, kept, skipped = [], [], []
    for bird, place_type in zip(birds, types):
        pool = places[place_type]
        place = pool[int(name_rng(seed, "waterbirds_place", bird.id).integers(len(pool)))]
        try:
            images.append(composite_bird(cub_root, segmentations, bird, place, size, Geometry.of(cfg)))
            kept.append((bird, place_type))
        except SkipItem as exc:
            skipped.append({"id": bird.id, "path": str(cub_root / "images" / bird.id), "reason": exc.reason})
    arrays = {
        "images": np.stack(images) if images else np.zeros((0, size, size, 3), np.uint8),
        "labels": np.array([b.label for b, _ in kept], np.int64),
        "bias_labels": np.array([t for _, t in kept], np.int64),
        "ids": np.array([b.id for b, _ in kept], dtype=str),
    }
    return arrays, skipped
