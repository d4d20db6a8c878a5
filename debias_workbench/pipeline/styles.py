"""Style images for Stylized IN-9, grouped by the class whose texture they show.

Geirhos et al. (2019) stylized with Painter-by-Numbers paintings, which no package ships. Here
every style has a class, because S-CLAD's negatives share a texture class and the cue-conflict
images behind the shape bias pair the shape of class A with a texture of class B:

- `embedded` (default): for each class k, `per_class` textures drawn by the embedded source's
  background generator of kind k, the background that class k's images show 90 % of the time
  (`pipeline.sources.synthetic`): "the texture of class k" of the embedded data. Seeded by name.
- `folder`: `root/<class name>/*` for every class of the dataset (e.g. texture crops of that
  class's objects); every file must decode.
- `flat`: `root/*`, class-free style images (Geirhos et al.'s Stylized-ImageNet uses paintings,
  which show no class), for datasets with too many classes for per-class textures (ImageNet-100).
  Their class is `NO_CLASS` (-1): the stylized store's bias labels are -1, so its val split is no
  cue-conflict set and the shape bias is not measured on it.

Each image is stylized with a style of a class drawn uniformly, then a style of that class drawn
uniformly, both seeded by the image's id. The class is drawn from all classes on the train split:
there the texture must carry no information about the label, as Geirhos et al.'s class-free
paintings do (drawing only other classes would teach "never the texture's class"). On the val
split, the cue-conflict set of the shape bias (shape of class A, texture of class B != A), it is
drawn from the classes other than the image's (`CUE_CONFLICT_SPLITS`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from debias_workbench.core.errors import PipelineError, SkipItem
from debias_workbench.core.seeding import name_rng

from .imageio import MIN_PICTURE_SIDE, Geometry, is_image_name, load_rgb
from .sources.listing import class_folders
from .sources.synthetic import BACKGROUNDS, render_background

#: the class of a `flat` style image: none
NO_CLASS = -1


@dataclass(frozen=True)
class StyleSet:
    images: list[np.ndarray]  # (size, size, 3) uint8 each
    ids: list[str]
    classes: np.ndarray  # (S,) class index of each style

    def of_class(self, cls: int) -> np.ndarray:
        return np.nonzero(self.classes == cls)[0]


def load_styles(cfg: dict[str, Any], classes: list[str], seed: int) -> StyleSet:
    """The style set `cfg` (`kind`, `root`, `per_class`, `size`) describes, for `classes`."""
    size = int(cfg["size"])
    if cfg["kind"] == "embedded":
        return _embedded(classes, int(cfg["per_class"]), size, seed)
    if not cfg.get("root"):
        what = (
            "a folder of style images (paintings)"
            if cfg["kind"] == "flat"
            else f"a folder with one subfolder of texture images per class ({', '.join(classes)})"
        )
        raise PipelineError(
            f"stylized.styles.kind is {cfg['kind']} but stylized.styles.root is not set; point it at {what}"
        )
    if cfg["kind"] == "flat":
        return _flat(Path(cfg["root"]).expanduser(), size)
    return _folder(Path(cfg["root"]).expanduser(), classes, size)


#: splits whose images are cue-conflict images (the shape bias's test set, Geirhos et al. 2019):
#: their style is of a class other than the image's; every other split draws it from all classes
CUE_CONFLICT_SPLITS = frozenset({"val"})


def choose_style(styles: StyleSet, label: int, item_id: str, seed: int, other_class_only: bool) -> int:
    """Index of the style for an image of class `label`: a class drawn uniformly (from the classes
    other than `label` when `other_class_only`, else from all), then one of its styles uniformly,
    both seeded by `item_id` alone, so the choice is the same on any number of workers. `flat`
    styles all have `NO_CLASS`, never a label: every image draws from all of them."""
    classes = sorted(set(styles.classes.tolist()))
    if other_class_only:
        classes = [c for c in classes if c != label]
    if not classes:
        raise SkipItem(f"no style of a class other than {label}: add styles of other classes")
    rng = name_rng(seed, "style", item_id)
    candidates = styles.of_class(classes[int(rng.integers(len(classes)))])
    return int(candidates[rng.integers(len(candidates))])


def _embedded(classes: list[str], per_class: int, size: int, seed: int) -> StyleSet:
    if len(classes) > len(BACKGROUNDS):
        raise PipelineError(
            f"embedded styles exist for {len(BACKGROUNDS)} classes, the dataset has {len(classes)}; "
            "set stylized.styles.kind: folder (or flat) and stylized.styles.root"
        )
    images, ids, labels = [], [], []
    for k in range(len(classes)):
        for i in range(per_class):
            style_id = f"embedded_{BACKGROUNDS[k]}_{i:03d}"
            rng = name_rng(seed, "style-image", style_id)
            c1, c2 = rng.integers(0, 256, size=(2, 3))
            images.append(render_background(k, size, c1, c2, rng).astype(np.uint8))
            ids.append(style_id)
            labels.append(k)
    return StyleSet(images, ids, np.array(labels, np.int64))


def _folder(root: Path, classes: list[str], size: int) -> StyleSet:
    if not root.is_dir():
        raise PipelineError(
            f"style folder {root} does not exist; create it with one subfolder of texture images per "
            f"class ({', '.join(classes)})"
        )
    images, ids, labels = [], [], []
    for k, folder in enumerate(class_folders(root, classes)):
        cls = folder.name
        files = sorted(p for p in folder.iterdir() if is_image_name(p))
        if not files:
            raise PipelineError(f"no style images in {folder}; put at least one texture image of class {cls} there")
        for path in files:
            try:
                image = load_rgb(path, MIN_PICTURE_SIDE)
            except SkipItem as exc:
                raise PipelineError(f"style image {path}: {exc.reason}") from exc
            images.append(Geometry().apply(image, size))
            ids.append(f"{cls}/{path.name}")
            labels.append(k)
    return StyleSet(images, ids, np.array(labels, np.int64))


def _flat(root: Path, size: int) -> StyleSet:
    """Every image file of `root` (sorted by name), without a class."""
    files = sorted(p for p in root.iterdir() if is_image_name(p)) if root.is_dir() else []
    if not files:
        raise PipelineError(f"no style images in {root}; put style images (e.g. paintings) directly in that folder")
    images = []
    for path in files:
        try:
            images.append(Geometry().apply(load_rgb(path, MIN_PICTURE_SIDE), size))
        except SkipItem as exc:
            raise PipelineError(f"style image {path}: {exc.reason}") from exc
    return StyleSet(images, [path.name for path in files], np.full(len(files), NO_CLASS, np.int64))
