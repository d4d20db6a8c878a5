"""BFFHQ and BAR as their debiasing releases ship them (the DisEnt / BiasEnsemble layout), read as
is, never downloaded:

    <root>/<p>pct/align/<label>/<name>_<label>_<bias>.<ext>      training, bias-aligned
    <root>/<p>pct/conflict/<label>/<name>_<label>_<bias>.<ext>   training, bias-conflicting
    <root>/valid/<name>_<label>_<bias>.<ext>                     validation (subfolders allowed)
    <root>/test/<name>_<label>_<bias>.<ext>                      test

Label and bias label are the last two `_`-separated fields of the file name (BFFHQ: age and
gender; BAR: action and background). Variants: `conflict_<p>` (train from `<p>pct`, val from
`valid`) for each p in `conflict_percents`, and `unbiased` (val split = `test`). Images are
centre-cropped to a square and resized to `image_size`; every other entry (a broken link, a file
that is not an image or cannot be decoded, a name without the two fields or with a label outside
`classes` / `bias_classes`) is listed in the manifest with its reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from debias_workbench.core.errors import PipelineError, SkipItem

from ..imageio import MIN_PICTURE_SIDE, Geometry, load_rgb
from ..sources.listing import entry_problem
from .base import BiasFreeReference
from .conflict_ratio import ConflictRatioFamily
from .labelled_store import write_labelled_store


def percent_folder(percent: float) -> str:
    return f"{percent:g}pct"


def parse_name(path: Path) -> tuple[int, int]:
    """(label, bias label) from `<anything>_<label>_<bias>.<ext>`."""
    parts = path.stem.split("_")
    try:
        return int(parts[-2]), int(parts[-1])
    except (IndexError, ValueError) as exc:
        raise SkipItem(
            f"{path.name}: the name does not end in _<label>_<bias> (integers), as the release's "
            "files do; rename it or remove it"
        ) from exc


def read_folder(
    folders: list[Path], size: int, geometry: Geometry, n_labels: int, n_bias: int
) -> tuple[dict[str, np.ndarray], int, list[dict[str, Any]]]:
    """Every entry under `folders` but folders and hidden files (sorted): arrays, the number of
    entries, skipped items. Broken links, files that are not images, undecodable images and names
    whose label (bias label) is not one of the `n_labels` (`n_bias`) are skipped with the reason."""
    for folder in folders:
        if not folder.is_dir():
            raise PipelineError(
                f"{folder} is missing: point `root` at the released folder (it holds <p>pct/align, "
                "<p>pct/conflict, valid and test)"
            )
    entries = sorted(
        p
        for folder in folders
        for p in folder.rglob("*")
        if not p.name.startswith(".") and (p.is_symlink() or not p.is_dir())
    )
    images, labels, bias, ids, skipped = [], [], [], [], []
    for path in entries:
        try:
            if (problem := entry_problem(path)) is not None:
                raise SkipItem(problem)
            label, bias_label = parse_name(path)
            if not (0 <= label < n_labels and 0 <= bias_label < n_bias):
                raise SkipItem(
                    f"{path.name}: label {label} / bias label {bias_label} is not one of the dataset's "
                    f"{n_labels} classes / {n_bias} bias classes; fix `classes` / `bias_classes` or the name"
                )
            images.append(geometry.apply(load_rgb(path, MIN_PICTURE_SIDE), size))
        except SkipItem as exc:
            skipped.append({"id": path.name, "path": str(path), "reason": exc.reason})
            continue
        labels.append(label)
        bias.append(bias_label)
        ids.append(str(path.relative_to(folders[0].parent)))
    arrays = {
        "images": np.stack(images) if images else np.zeros((0, size, size, 3), np.uint8),
        "labels": np.array(labels, np.int64),
        "bias_labels": np.array(bias, np.int64),
        "ids": np.array(ids, dtype=str),
    }
    return arrays, len(entries), skipped


class ReleasedBiasFoldersFamily(ConflictRatioFamily):
    name = "released_bias_folders"
    licence = (
        "a released bias benchmark read as given (BFFHQ from FFHQ: CC BY-NC-SA 4.0; BAR: the authors' "
        "research terms): the release's own licence applies"
    )
    val_split = "the release's valid/ folder as it is"
    offers = {
        "biased_network": "BagNet18, a small-receptive-field G as Park et al.'s ReBias baseline: biased towards local "
        "texture, not by design towards the release's bias (BFFHQ's gender, BAR's background)"
    }

    def bias_free_reference(self, ds_cfg: dict[str, Any], train_variant: str) -> BiasFreeReference | None:
        """None: a release holds its own percentages only, no training set with the bias balanced away."""
        return None

    def input_paths(self, ds_cfg: dict[str, Any], variant: str) -> list[str]:
        return [str(Path(ds_cfg["root"]).expanduser())]

    def expected_images(self, ds_cfg: dict[str, Any], split: str) -> int:
        return 20_000 if split == "train" else 1_000  # BFFHQ's order of magnitude

    def build(self, ds_cfg: dict[str, Any], seed: int, out: Path, variant: str, percent: float | None) -> None:
        root, size = Path(ds_cfg["root"]).expanduser(), int(ds_cfg["image_size"])
        if percent is None:
            plan = {"val": [root / "test"]}
        else:
            plan = {
                "train": [root / percent_folder(percent) / "align", root / percent_folder(percent) / "conflict"],
                "val": [root / "valid"],
            }
        parts = {}
        for split, folders in plan.items():
            arrays, inputs_count, skipped = read_folder(
                folders, size, Geometry.of(ds_cfg), len(ds_cfg["classes"]), len(ds_cfg["bias_classes"])
            )
            parts[split] = {**arrays, "manifest": {"inputs": inputs_count, "skipped": skipped}}
        write_labelled_store(
            out, self.name, variant, ds_cfg, seed, parts, list(ds_cfg["classes"]), list(ds_cfg["bias_classes"])
        )
