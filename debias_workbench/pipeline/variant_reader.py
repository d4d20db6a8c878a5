"""One split of a variant store, read row by row without torch: what `debias_workbench.load_variant`
(a PyTorch dataset) and `workbench export` hand over.

A row is {"image": (H, W, 3) uint8, "label": int, "bias_label": int, "id": str} plus "mask"
(H, W) uint8 where the variant stores masks and "style_id" for Stylized IN-9 (docs/workflow.md,
"Outputs and data format"). Rows are read a chunk at a time and the last chunk is kept, so reading in
order costs one decode per chunk; the store is opened on first use in each process (a DataLoader
worker opens its own).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import numpy as np
import zarr

from debias_workbench.core.errors import PipelineError

from .fingerprint import check_store, read_fingerprint

#: the per-row arrays every split has, and the field each becomes in a row
ROW_FIELDS = {"labels": "label", "bias_labels": "bias_label", "ids": "id"}
#: per-row arrays some variants have
OPTIONAL_FIELDS = {"masks": "mask", "style_ids": "style_id"}


class VariantSplit:
    """The rows of `split` ("train" or "val") of the store at `store`; the store's cheap check
    (`fingerprint.check_store`: every array present with its chunks) runs first."""

    def __init__(self, store: Path | str, split: str):
        self.store, self.split = Path(store), split
        check_store(self.store)
        splits = sorted({path.split("/")[0] for path in read_fingerprint(self.store)["arrays"] if "/" in path})
        if split not in splits:
            raise PipelineError(f"{self.store} has no split {split!r}; it has {splits}")
        root = zarr.open_group(str(self.store), mode="r")
        self.attrs: dict[str, Any] = dict(root.attrs)
        group = root[split]
        self.fields = [f for f in OPTIONAL_FIELDS if f in group]
        self.length = int(group["labels"].shape[0])
        self.chunk_rows = int(group["images"].chunks[0])
        self._group: zarr.Group | None = None   # opened again in each process that reads
        self._cached: tuple[int, dict[str, np.ndarray]] | None = None

    @property
    def classes(self) -> list[str]:
        return list(self.attrs["classes"])

    @property
    def bias_classes(self) -> list[str]:
        return list(self.attrs.get("bias_classes", self.attrs["classes"]))

    def __len__(self) -> int:
        return self.length

    def __getstate__(self) -> dict[str, Any]:  # pickled into DataLoader workers: no open handles
        return {**self.__dict__, "_group": None, "_cached": None}

    def __getitem__(self, index: int) -> dict[str, Any]:
        if not -self.length <= index < self.length:
            raise IndexError(f"row {index} of {self.length} in {self.store}:{self.split}")
        index %= self.length
        start = index - index % self.chunk_rows
        block = self._block(start)
        return self._row(block, index - start)

    def rows(self) -> Iterator[dict[str, Any]]:
        """Every row in order, one chunk decoded at a time."""
        for start in range(0, self.length, self.chunk_rows):
            block = self._block(start)
            for k in range(len(block["labels"])):
                yield self._row(block, k)

    def _block(self, start: int) -> dict[str, np.ndarray]:
        if self._cached is None or self._cached[0] != start:
            if self._group is None:
                self._group = zarr.open_group(str(self.store), mode="r")[self.split]
            stop = min(start + self.chunk_rows, self.length)
            names = ["images", *ROW_FIELDS, *self.fields]
            self._cached = (start, {name: self._group[name][start:stop] for name in names})
        return self._cached[1]

    @staticmethod
    def _row(block: dict[str, np.ndarray], k: int) -> dict[str, Any]:
        row: dict[str, Any] = {"image": block["images"][k], "label": int(block["labels"][k]),
                               "bias_label": int(block["bias_labels"][k]), "id": str(block["ids"][k])}
        for name, field in OPTIONAL_FIELDS.items():
            if name in block:
                row[field] = block[name][k] if name == "masks" else str(block[name][k])
        return row
