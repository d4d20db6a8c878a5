"""Real-shaped stand-ins for the user's files that the paper configs point at.

Each builder writes, under a folder it is given, files in exactly the layout and format the paper
configs expect (an IN-9 photo folder with VOC boxes, idx digit files, CUB / Places folders, released
BFFHQ / BAR folders, an ImageNet tree, a ResNet-50 state_dict with its sha256), but with only a few
images, so that every paper config runs end to end in smoke mode in the test suite.
"""

from __future__ import annotations

import gzip
import hashlib
import struct
from pathlib import Path

import cv2
import numpy as np
import torch
import torchvision

from debias_workbench.pipeline.annotations import write_voc_xml

IN9_CLASSES = ["00_dog", "01_bird", "02_wheeled_vehicle", "03_reptile", "04_carnivore", "05_insect",
               "06_musical_instrument", "07_primate", "08_fish"]


def _picture(rng: np.random.Generator, shape: tuple[int, int] = (96, 128)) -> np.ndarray:
    """A photo-like stand-in: a smooth random background with a bright ellipse (the object)."""
    h, w = shape
    small = rng.integers(0, 255, (4, 4, 3), dtype=np.uint8)
    image = cv2.resize(small, (w, h), interpolation=cv2.INTER_CUBIC)
    colour = tuple(int(c) for c in rng.integers(0, 255, 3))
    cv2.ellipse(image, (w // 2, h // 2), (w // 4, h // 3), 0, 0, 360, colour, -1)
    return image


def make_in9_folder(root: Path, photos: Path | None, per_class: dict[str, int]) -> tuple[Path, Path]:
    """A Background-Challenge folder `root/original/<split>/<NN_class>/<wnid>_<k>.JPEG` and VOC boxes
    `root/Annotation/<wnid>/<stem>.xml` (a box around the object's middle); (folder, annotations).
    `photos`: a folder of real photos per class (../shared/data/in9-photos-dev), else drawn ones."""
    rng = np.random.default_rng(0)
    annotations = root / "Annotation"
    for c, cls in enumerate(IN9_CLASSES):
        real = sorted((photos / cls).glob("*.JPEG")) if photos else []
        k = 0
        for split, n in per_class.items():
            folder = root / "original" / split / cls
            folder.mkdir(parents=True, exist_ok=True)
            for _ in range(n):
                if real:
                    path = real[k % len(real)]
                    image = cv2.imread(str(path))
                    stem = f"{path.stem.split('_')[0]}_{k}"
                else:
                    image, stem = _picture(rng), f"n{c:08d}_{k}"
                cv2.imwrite(str(folder / f"{stem}.JPEG"), image)
                h, w = image.shape[:2]
                write_voc_xml(annotations / stem.split("_")[0] / f"{stem}.xml", f"{stem}.JPEG", w, h, cls,
                              [(w // 8, h // 8, w - w // 8, h - h // 8)])
                k += 1
    return root, annotations


def make_style_folder(root: Path, classes: list[str] = IN9_CLASSES) -> Path:
    """One texture image per class folder (`stylized.styles.kind: folder`)."""
    rng = np.random.default_rng(1)
    for cls in classes:
        (root / cls).mkdir(parents=True, exist_ok=True)
        cv2.imwrite(str(root / cls / "texture.jpg"), rng.integers(0, 255, (80, 80, 3), dtype=np.uint8))
    return root


def make_resnet50_weights(path: Path, arch: str = "resnet50") -> str:
    """A ResNet-50 (or `arch`) state_dict from a seeded random init, in torchvision's layout; its sha256."""
    torch.manual_seed(0)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(getattr(torchvision.models, arch)().state_dict(), path)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_idx(path: Path, array: np.ndarray, gz: bool = True) -> None:
    """An idx file (the MNIST format: magic 0x08 <ndim>, big-endian shape, uint8 data)."""
    header = bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    (gzip.open if gz else open)(path, "wb").write(header + array.astype(np.uint8).tobytes())


def make_mnist_idx(root: Path, train_per_class: int, test_per_class: int) -> dict[str, str]:
    """MNIST's four idx.gz files with scikit-learn's digits scaled to 28 px; the source keys."""
    from debias_workbench.pipeline.mnist import sklearn_digits_28

    images, labels = sklearn_digits_28()
    picks = {"train": [], "test": []}
    for digit in range(10):
        rows = np.flatnonzero(labels == digit)
        picks["train"] += list(rows[:train_per_class])
        picks["test"] += list(rows[train_per_class:train_per_class + test_per_class])
    root.mkdir(parents=True, exist_ok=True)
    out = {}
    for split, prefix in (("train", "train"), ("test", "t10k")):
        rows = np.array(sorted(picks[split]))
        write_idx(root / f"{prefix}-images-idx3-ubyte.gz", images[rows])
        write_idx(root / f"{prefix}-labels-idx1-ubyte.gz", labels[rows])
        out[f"{split}_images"] = str(root / f"{prefix}-images-idx3-ubyte.gz")
        out[f"{split}_labels"] = str(root / f"{prefix}-labels-idx1-ubyte.gz")
    return out



def make_places(places: Path, rng: np.random.Generator) -> None:
    """Places365's four Waterbirds background categories, three noise images each."""
    for category in ("b/bamboo_forest", "f/forest/broadleaf", "o/ocean", "l/lake/natural"):
        (places / category).mkdir(parents=True)
        for k in range(3):
            cv2.imwrite(str(places / category / f"{k}.jpg"), rng.integers(0, 255, (50, 60, 3), dtype=np.uint8))

def make_cub_places(root: Path, birds_per_species: int = 10) -> dict[str, str]:
    """CUB-200-2011 (images/, images.txt, train_test_split.txt; two water- and two landbird
    species), its segmentations and Places' four background folders; the Waterbirds keys."""
    rng = np.random.default_rng(2)
    species = ["045.Northern_Fulmar", "059.California_Gull", "118.House_Sparrow", "160.Black_throated_Blue_Warbler"]
    cub, seg, places = root / "CUB_200_2011", root / "segmentations", root / "places"
    lines, split = [], []
    for s, name in enumerate(species):
        for k in range(birds_per_species):
            rel = f"{name}/{name.split('.')[1]}_{k:04d}.jpg"
            (cub / "images" / name).mkdir(parents=True, exist_ok=True)
            (seg / name).mkdir(parents=True, exist_ok=True)
            cv2.imwrite(str(cub / "images" / rel), _picture(rng, (60, 80)))
            mask = np.zeros((60, 80), np.uint8)
            cv2.ellipse(mask, (40, 30), (20, 20), 0, 0, 360, 255, -1)
            cv2.imwrite(str(seg / rel).replace(".jpg", ".png"), mask)
            lines.append(f"{len(lines) + 1} {rel}")
            split.append(f"{len(split) + 1} {int(k < birds_per_species * 7 // 10)}")
    (cub / "images.txt").write_text("\n".join(lines) + "\n")
    (cub / "train_test_split.txt").write_text("\n".join(split) + "\n")
    make_places(places, rng)
    return {"cub_root": str(cub), "segmentations": str(seg), "places_root": str(places)}


def make_release(root: Path, percents: list[float], n_labels: int, aligned: int = 4) -> str:
    """A released BFFHQ / BAR folder: `<p>pct/{align,conflict}/<label>/<k>_<label>_<bias>.png`,
    `valid/` and `test/` (one bias-aligned and one bias-conflicting image per label each)."""
    rng = np.random.default_rng(3)

    def write(path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        cv2.imwrite(str(path), _picture(rng, (48, 64)))

    for p in percents:
        folder = root / f"{p:g}pct"
        for label in range(n_labels):
            other = (label + 1) % n_labels
            for k in range(aligned):
                write(folder / "align" / str(label) / f"{k}_{label}_{label}.png")
            write(folder / "conflict" / str(label) / f"{aligned}_{label}_{other}.png")
    for part in ("valid", "test"):
        for label in range(n_labels):
            write(root / part / f"{part}{label}a_{label}_{label}.png")
            write(root / part / f"{part}{label}c_{label}_{(label + 1) % n_labels}.png")
    return str(root)


def make_imagenet_tree(root: Path, photos: Path | None, classes_with_images: int = 4,
                       per_class: dict[str, int] | None = None) -> Path:
    """An ImageNet-100 stand-in under `root`, returned: `train/<wnid>/<wnid>_<k>.JPEG` and
    `val/<wnid>/ILSVRC2012_val_<k>.JPEG` folders for all 100 wnids of Tian et al.'s CMC list (the
    first `classes_with_images` holding `per_class[split]` small images, the others empty, so a
    model keeps its 100 outputs) and one folder of a wnid outside the list (never read); beside
    them `sketch/<wnid>/` (Canny edges, ImageNet-Sketch's layout) and `imagenet-r/<wnid>/`
    (posterised copies) for the same classes plus one outside wnid each, and `paintings/` (three
    class-free style images). `photos`: ../shared/data/in9-photos-dev, whose `<wnid>_<name>.JPEG`
    photos are used for the CMC classes they show (shrunk to 160 px); else drawn pictures."""
    from debias_workbench.pipeline.sources.imagenet_subset import cmc_imagenet100_wnids

    per_class = per_class or {"train": 2, "val": 1}
    rng = np.random.default_rng(4)
    wnids = sorted(cmc_imagenet100_wnids())
    real = {p.stem.split("_")[0]: p for p in sorted(photos.glob("*/*.JPEG"))} if photos else {}
    with_images = ([w for w in wnids if w in real] + [w for w in wnids if w not in real])[:classes_with_images]
    outside = "n01440764"  # tench: an ImageNet-1k class that is not in the list

    def picture(wnid: str, k: int) -> np.ndarray:
        if wnid not in real:
            return _picture(rng)
        image = cv2.imread(str(real[wnid]))
        scale = 160 / max(image.shape[:2])
        image = cv2.resize(image, (round(image.shape[1] * scale), round(image.shape[0] * scale)),
                           interpolation=cv2.INTER_AREA)
        return image if k % 2 == 0 else image[:, ::-1]  # a flipped copy: another image of the class

    k = 0
    for wnid in [*wnids, outside]:
        for split, n in per_class.items():
            folder = root / split / wnid
            folder.mkdir(parents=True, exist_ok=True)
            for _ in range(n if wnid in with_images or wnid == outside else 0):
                name = f"{wnid}_{k}.JPEG" if split == "train" else f"ILSVRC2012_val_{k + 1:08d}.JPEG"
                cv2.imwrite(str(folder / name), picture(wnid, k))
                k += 1
    for wnid in [*with_images, outside]:
        image = picture(wnid, 0)
        edges = 255 - cv2.Canny(cv2.cvtColor(image, cv2.COLOR_BGR2GRAY), 50, 150)
        (root / "sketch" / wnid).mkdir(parents=True)
        cv2.imwrite(str(root / "sketch" / wnid / "sketch_0.JPEG"), cv2.cvtColor(edges, cv2.COLOR_GRAY2BGR))
        (root / "imagenet-r" / wnid).mkdir(parents=True)
        cv2.imwrite(str(root / "imagenet-r" / wnid / "cartoon_0.jpg"), (image // 64) * 64 + 32)
    (root / "paintings").mkdir()
    for j in range(3):
        cv2.imwrite(str(root / "paintings" / f"painting_{j}.jpg"), _picture(rng, (90, 120)))
    return root


def make_official_folder(root: Path, size: int = 40) -> None:
    """The released Background Challenge test folder (`<variant>/val/<NN_class>/*`): two variants,
    every class folder, two classes with three images each (one a broken link in mixed_next)."""
    rng = np.random.default_rng(0)
    for variant in ("original", "mixed_next"):
        for c, cls in enumerate(IN9_CLASSES):
            d = root / variant / "val" / cls
            d.mkdir(parents=True)
            for i in range(3 if c < 2 else 0):
                cv2.imwrite(str(d / f"n0000_{i}.JPEG"), rng.integers(0, 256, (size, size, 3), dtype=np.uint8))
    (root / "mixed_next" / "val" / IN9_CLASSES[1] / "n0000_2.JPEG").unlink()
    (root / "mixed_next" / "val" / IN9_CLASSES[1] / "n0000_2.JPEG").symlink_to(root / "gone.JPEG")


def official_cfg(root: Path, size: int = 32) -> dict:
    return {"family": "bg_challenge", "root": str(root), "classes": IN9_CLASSES, "image_size": size, "geometry": "crop", "crop_fraction": 1.0, "chunk_images": 4,
            "variants": ["original", "mixed_next"]}


def write_paper_paths(root: Path, photos: Path | None) -> Path:
    """Every stand-in the paper configs (config/imagenet9.yaml, biased_mnist_paper.yaml,
    park_real_data.yaml, imagenet100_ssl.yaml) point at, built under `root`, and `root/paths.yaml` filling their FILL ME
    keys with smoke mode on."""
    import yaml

    from debias_workbench.pipeline.adain import packaged_weights

    in9, boxes = make_in9_folder(root / "bg_challenge", photos, {"train": 3, "val": 2})
    weights = root / "models" / "resnet50-random.pth"
    sha = make_resnet50_weights(weights)
    r18 = root / "models" / "resnet18-random.pth"
    sha18 = make_resnet50_weights(r18, "resnet18")
    mnist = make_mnist_idx(root / "mnist", 20, 10)
    imagenet = make_imagenet_tree(root / "imagenet", photos)
    make_official_folder(root / "bg_challenge_release")
    paths = {
        "smoke": True,
        "datasets": {
            "in9": {"source": {"in9_folder": {"root": str(in9), "annotations": str(boxes)}},
                    "stylized": {"styles": {"root": str(make_style_folder(root / "in9_textures"))}}},
            "biased_mnist": {"source": mnist},
            "colored_mnist": {"source": dict(mnist)},
            "waterbirds": make_cub_places(root / "waterbirds"),
            "bffhq": {"root": make_release(root / "bffhq", [0.5, 1, 2, 5], 2)},
            "bar": {"root": make_release(root / "bar", [1, 5], 6)},
            "official": official_cfg(root / "bg_challenge_release", size=224),
            "imagenet100": {"source": {"imagenet_subset": {"root": str(imagenet)}},
                            "external": {"imagenet_sketch": str(imagenet / "sketch"),
                                         "imagenet_r": str(imagenet / "imagenet-r")},
                            "stylized": {"styles": {"root": str(imagenet / "paintings")}}},
        },
        "training": {"pretrained": str(weights), "pretrained_sha256": sha},
        "grids": {"park_bar": {"training": {"pretrained": str(r18), "pretrained_sha256": sha18}}},
        "evaluation": {"official_dataset": "official"},
        "analyses": {"texture": {"vgg": str(packaged_weights("vgg_normalised.pth"))}},
    }
    out = root / "paths.yaml"
    out.write_text(yaml.safe_dump(paths, sort_keys=False))
    return out
