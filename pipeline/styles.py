"""Style images for Stylized IN-9, grouped by the class whose texture they show.

Geirhos et al. (2019) stylized with Painter-by-Numbers paintings, which no package ships. Here
every style has a class, because S-CLAD's negatives share a texture class and the cue-conflict
images behind the shape bias pair the shape of class A with a texture of class B:

- `embedded` (default): for each class k, `per_class` textures drawn by the embedded source's
  background generator of kind k, the background that class k's images show 90 % of the time
  (`pipeline.sources.synthetic`): "the texture of class k" of the embedded data. Seeded by name.
- `folder`: `root/<class name>/*` for every class of the dataset (e.g. texture crops of that
  class's objects); every file must decode.

Each image of class y is stylized with a style of a class drawn uniformly from the other
classes, then a style of that class drawn uniformly, both seeded by the image's id.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from .errors import PipelineError, SkipItem
from .imageio import is_image_name, load_rgb
from .seeding import name_rng
from .sources.synthetic import BACKGROUNDS, render_background


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
        raise PipelineError("stylize.styles.kind is folder but stylize.styles.root is not set; point it at a folder "
                            f"with one subfolder of texture images per class ({', '.join(classes)})")
    return _folder(Path(cfg["root"]).expanduser(), classes, size)


def choose_style(styles: StyleSet, label: int, item_id: str, seed: int) -> int:
    """Index of the style for an image of class `label`: another class uniformly, then one of its styles."""
    others = [c for c in sorted(set(styles.classes.tolist())) if c != label]
    if not others:
        raise SkipItem(f"no style of a class other than {label}: add styles of other classes")
    rng = name_rng(seed, "style", item_id)
    candidates = styles.of_class(others[int(rng.integers(len(others)))])
    return int(candidates[rng.integers(len(candidates))])


def _embedded(classes: list[str], per_class: int, size: int, seed: int) -> StyleSet:
    if len(classes) > len(BACKGROUNDS):
        raise PipelineError(f"embedded styles exist for {len(BACKGROUNDS)} classes, the dataset has {len(classes)}; "
                            "set stylize.styles.kind: folder and stylize.styles.root")
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
        raise PipelineError(f"style folder {root} does not exist; create it with one subfolder of texture images per "
                            f"class ({', '.join(classes)})")
    images, ids, labels = [], [], []
    for k, cls in enumerate(classes):
        folder = root / cls
        files = sorted(p for p in folder.iterdir() if is_image_name(p)) if folder.is_dir() else []
        if not files:
            raise PipelineError(f"no style images in {folder}; put at least one texture image of class {cls} there")
        for path in files:
            try:
                image = load_rgb(path, 1)
            except SkipItem as exc:
                raise PipelineError(f"style image {path}: {exc.reason}") from exc
            images.append(_square(image, size))
            ids.append(f"{cls}/{path.name}")
            labels.append(k)
    return StyleSet(images, ids, np.array(labels, np.int64))


def _square(image: np.ndarray, size: int) -> np.ndarray:
    """Shorter side resized to `size`, then the centre size x size crop."""
    h, w = image.shape[:2]
    scale = size / min(h, w)
    nh, nw = max(size, round(h * scale)), max(size, round(w * scale))
    resized = cv2.resize(image, (nw, nh), interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_CUBIC)
    top, left = (nh - size) // 2, (nw - size) // 2
    return resized[top:top + size, left:left + size]
