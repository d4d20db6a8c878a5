"""One split of a variant store, read row by row without torch: what `debias_workbench.load_variant`
(a PyTorch dataset) and `workbench export` hand over.

A row is {"image": (H, W, 3) uint8, "label": int, "bias_label": int, "id": str} plus "mask"
(H, W) uint8 where the variant stores masks and "style_id" for Stylized IN-9 (docs/workflow.md,
"Outputs and data format"). A training split of whole photos (`train_views: photo`: each stored
squashed, with its aspect) gives each photo back at its aspect, its shorter side the stored side
(`imageio.unsquashed`: what Resize(256) of the photo gives, for one's own RandomResizedCrop), and its
"aspect" (width / height). The per-row labels and ids are read whole once (they are one small
chunk each); images and masks a chunk at a time, the last chunk kept, so reading in order costs
one decode per chunk. The store is opened on first use in each process (a DataLoader worker opens
its own).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import zarr

from debias_workbench.core.errors import PipelineError

from .fingerprint import check_store, read_fingerprint
from .imageio import unsquashed

#: the per-row arrays every split has (rows' "label", "bias_label", "id")
ROW_FIELDS = ("labels", "bias_labels", "ids")
#: per-row arrays some variants have (rows' "mask", "style_id", "aspect")
OPTIONAL_FIELDS = ("masks", "style_ids", "aspects")


def store_splits(store: Path) -> list[str]:
    """The splits ("train", "val") a store's fingerprint lists arrays of."""
    return sorted({path.split("/")[0] for path in read_fingerprint(store)["arrays"] if "/" in path})


class VariantSplit:
    """The rows of `split` ("train" or "val") of the store at `store`; the store's cheap check
    (`fingerprint.check_store`: every array present with its chunks) runs first."""

    def __init__(self, store: Path | str, split: str):
        self.store, self.split = Path(store), split
        check_store(self.store)
        splits = store_splits(self.store)
        if split not in splits:
            raise PipelineError(f"{self.store} has no split {split!r}; it has {splits}")
        root = zarr.open_group(str(self.store), mode="r")
        self.attrs: dict[str, Any] = dict(root.attrs)
        group = root[split]
        self.fields = [f for f in OPTIONAL_FIELDS if f in group]
        self.length = int(group["labels"].shape[0])
        self.chunk_rows = int(group["images"].chunks[0])
        self._group: zarr.Group | None = None  # opened again in each process that reads
        self._columns: dict[str, np.ndarray] | None = None  # the per-row arrays, read whole on first use
        self._cached: tuple[int, dict[str, np.ndarray]] | None = None  # the last image (and mask) chunk

    @property
    def classes(self) -> list[str]:
        return list(self.attrs["classes"])

    @property
    def bias_classes(self) -> list[str]:
        return list(self.attrs.get("bias_classes", self.attrs["classes"]))

    def __len__(self) -> int:
        return self.length

    def __getstate__(self) -> dict[str, Any]:  # pickled into DataLoader workers: no open handles
        return {**self.__dict__, "_group": None, "_columns": None, "_cached": None}

    def __getitem__(self, index: int) -> dict[str, Any]:
        if not -self.length <= index < self.length:
            raise IndexError(f"row {index} of {self.length} in {self.store}:{self.split}")
        index %= self.length
        start = index - index % self.chunk_rows
        return self._row(self._block(start), index - start, index)

    def rows(self) -> Iterator[dict[str, Any]]:
        """Every row in order, one chunk decoded at a time."""
        for start in range(0, self.length, self.chunk_rows):
            block = self._block(start)
            for k in range(len(block["images"])):
                yield self._row(block, k, start + k)

    def _open(self) -> zarr.Group:
        if self._group is None:
            self._group = zarr.open_group(str(self.store), mode="r")[self.split]
            names = [*ROW_FIELDS, *(f for f in self.fields if f != "masks")]
            self._columns = {name: self._group[name][:] for name in names}
        return self._group

    def _block(self, start: int) -> dict[str, np.ndarray]:
        if self._cached is None or self._cached[0] != start:
            group, stop = self._open(), min(start + self.chunk_rows, self.length)
            self._cached = (start, {name: group[name][start:stop] for name in ("images", "masks") if name in group})
        return self._cached[1]

    def _row(self, block: dict[str, np.ndarray], k: int, index: int) -> dict[str, Any]:
        columns = self._columns
        assert columns is not None  # read by `_open` (`_block`) before any row
        row: dict[str, Any] = {
            "image": block["images"][k],
            "label": int(columns["labels"][index]),
            "bias_label": int(columns["bias_labels"][index]),
            "id": str(columns["ids"][index]),
        }
        if "masks" in block:
            row["mask"] = block["masks"][k]
        if "style_ids" in columns:
            row["style_id"] = str(columns["style_ids"][index])
        if "aspects" in columns:
            row["aspect"] = float(columns["aspects"][index])
            row["image"] = unsquashed(row["image"], row["aspect"])
        return row
