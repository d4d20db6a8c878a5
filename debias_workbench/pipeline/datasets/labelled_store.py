"""The store and manifest of one variant built whole in one process (Biased MNIST, Colored MNIST,
Waterbirds): images, labels, bias labels and ids per split."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import zarr

from debias_workbench.core.atomic import write_json
from debias_workbench.core.provenance import store_provenance

from ..store import atomic_store, create_array

DIGITS = [str(d) for d in range(10)]
COLOUR_NAMES = ["red", "green", "blue", "yellow", "magenta", "cyan", "orange", "pink", "purple", "grey"]


def write_labelled_store(
    out: Path,
    family: str,
    variant: str,
    ds_cfg: dict[str, Any],
    seed: int,
    splits: dict[str, dict[str, Any]],
    classes: list[str] = DIGITS,
    bias_classes: list[str] = COLOUR_NAMES,
) -> None:
    """`splits`: {split: {"images" (N, S, S, 3) uint8, "labels", "bias_labels", "ids", "manifest":
    {"inputs", "skipped", ...}, and optionally "masks" (N, S, S) uint8, 1 on the foreground, as IN-9's}}
    (inputs and skipped default to N and none). Written atomically; the manifest beside it counts every input."""
    manifest = {}
    with atomic_store(out) as tmp:
        group = zarr.open_group(tmp, mode="w")
        size = next(iter(splits.values()))["images"].shape[1]
        group.attrs.update(
            {
                "classes": classes,
                "bias_classes": bias_classes,
                "variant": variant,
                "family": family,
                "image_size": size,
                "provenance": store_provenance(ds_cfg, seed),
            }
        )
        for split, part in splits.items():
            n, one = len(part["labels"]), max(len(part["labels"]), 1)
            sub = group.create_group(split)
            create_array(sub, "images", (n, size, size, 3), np.uint8, int(ds_cfg["chunk_images"]))[:] = part["images"]
            create_array(sub, "labels", (n,), np.int64, one, one)[:] = part["labels"]
            create_array(sub, "bias_labels", (n,), np.int64, one, one)[:] = part["bias_labels"]
            create_array(sub, "ids", (n,), str, one, one)[:] = part["ids"]
            if "masks" in part:
                create_array(sub, "masks", (n, size, size), np.uint8, int(ds_cfg["chunk_images"]))[:] = part["masks"]
            manifest[split] = {"inputs": n, "outputs": n, "skipped": [], **part["manifest"]}
    write_json(out.parent / f"{variant}.manifest.json", manifest)
