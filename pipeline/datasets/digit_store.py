"""The store and manifest of one MNIST-family variant (Biased MNIST, Colored MNIST): 28x28 RGB
digits, labels, colour indices as bias labels and ids, per split."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import zarr

from ..store import atomic_path, code_version, config_hash, create_array, write_json

CLASSES = [str(d) for d in range(10)]
COLOUR_NAMES = ["red", "green", "blue", "yellow", "magenta", "cyan", "orange", "pink", "purple", "grey"]


def write_digit_store(out: Path, family: str, variant: str, ds_cfg: dict[str, Any], seed: int,
                      splits: dict[str, dict[str, Any]]) -> None:
    """`splits`: {split: {"images" (N, 28, 28, 3) uint8, "labels", "colours", "ids", "manifest":
    extra manifest keys}}. Written atomically; the manifest beside it counts every digit."""
    manifest = {}
    with atomic_path(out) as tmp:
        group = zarr.open_group(tmp, mode="w")
        group.attrs.update({"classes": CLASSES, "bias_classes": COLOUR_NAMES, "variant": variant, "family": family,
                            "image_size": 28, "provenance": {"config_hash": config_hash(ds_cfg), "seed": seed,
                                                             "code_version": code_version()}})
        for split, part in splits.items():
            n, one = len(part["labels"]), max(len(part["labels"]), 1)
            sub = group.create_group(split)
            create_array(sub, "images", (n, 28, 28, 3), np.uint8, int(ds_cfg["chunk_images"]))[:] = part["images"]
            create_array(sub, "labels", (n,), np.int64, one, one)[:] = part["labels"]
            create_array(sub, "bias_labels", (n,), np.int64, one, one)[:] = part["colours"]
            create_array(sub, "ids", (n,), str, one, one)[:] = part["ids"]
            manifest[split] = {"inputs": n, "outputs": n, "skipped": [], **part["manifest"]}
    write_json(out.parent / f"{variant}.manifest.json", manifest)
