"""Fast batches from the workbench's zarr variant stores (their augmentation: `training.augment`).

`ZarrBatches` reads a split in units of `read_chunks` whole consecutive chunks (shards for sharded
arrays). When the split fits in `in_memory_max_gb` it is read once and shuffled globally each
epoch. Otherwise it streams: each epoch deals the units of the whole split in a random order into
windows of about `window_gb` of images (and at least `UNITS_PER_CLASS` units per class), and
shuffles the rows within each window. Stores are written in class order, so a unit holds one or
two classes; a window of many units drawn from the whole split holds the classes in about their
proportions, and its batches mix classes as i.i.d. sampling does (a window of two 8-chunk runs,
the earlier design, gave batches of one or two classes at paper scale: batch norm, CLAD's
other-class partners and MoCo's queue saw almost one class). Zarr decompresses whole chunks, so a
unit costs one chunk's decoding however it is placed; its reads of scattered rows cost ~100x more.
Background threads read ahead. The order of epoch e is a function of (name, seed, e) only, so a
resumed run sees the same batches as an uninterrupted one. `aligned` adds the images of other
variant stores of the same dataset under new field names (and their bias labels as
`<name>_bias_labels`), row for row (their `ids` are checked to match): CLAD reads each anchor's
ONLY_BG_T background this way, in the same reads as the anchors themselves, and S-CLAD its
stylized copy and the style's class. With `shard=(rank, world)` (several training processes) every
process draws the same global order and `epoch` yields its own contiguous share of each global
batch (`share`); each process still caches, or in streaming mode reads, whole windows of the split
(reading only its own rows would scatter the reads). A training split of whole photos (`train_views:
photo`: each photo squashed to a square, its aspect in `aspects`) is read only by a caller that cuts
its views from them (`cuts_views`, `PhotoSplit`); every batch then carries the `aspects`.
"""

from __future__ import annotations

import copy
import itertools
import math
import queue
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

import numpy as np
import torch
import zarr

from debias_workbench.core.seeding import name_seed
from debias_workbench.pipeline.fingerprint import check_store

#: read units a streamed window holds per class at least: each class then comes in about 8 units
#: (Poisson), and batches drawn from the window hold ~98 % of the distinct classes of i.i.d. batches
#: (tests/test_loader.py; IN-100 at 224 px: 800 units of 32 images, 3.8 GB a window)
UNITS_PER_CLASS = 8


@dataclass(frozen=True)
class PhotoSplit:
    """A training split of whole photos (`train_views: photo`, pipeline/variant_stage.py): the side
    of the views cut from them (the store's `image_size`, the test images') and the test geometry's
    share of a photo's shorter side (`crop_fraction`), the view a training photo is scored in."""

    view_size: int
    fraction: float


def photo_split(root: zarr.Group, store: Path | str, split: str, cuts_views: bool) -> PhotoSplit | None:
    """The `PhotoSplit` of `split` of the store `root` (at `store`), None for a split of stored images;
    a ValueError naming the store when it holds photos and the caller (`cuts_views` False) would take
    them for images."""
    if "aspects" not in root[split]:
        return None
    if not cuts_views:
        raise ValueError(
            f"{store}/{split} holds whole photos squashed to squares (train_views: photo), from which "
            "only the self-supervised methods cut their training views: score the val split "
            "(evaluation.split: val), train such a method, or build the dataset with train_views: square"
        )
    return PhotoSplit(int(root.attrs["image_size"]), float(root.attrs["train_photos"]["fraction"]))


class ZarrBatches:
    def __init__(
        self,
        store: Path | str,
        split: str,
        batch_size: int,
        *,
        shuffle: bool,
        seed: int = 0,
        name: str = "",
        drop_last: bool = False,
        read_chunks: int = 1,
        window_gb: float = 1.0,
        units_per_class: int = UNITS_PER_CLASS,
        in_memory_max_gb: float = 4.0,
        prefetch: int = 2,
        fields: tuple[str, ...] = ("images", "labels", "bias_labels"),
        pin_memory: bool = False,
        aligned: Mapping[str, Path | str] | None = None,
        max_batches: int | None = None,
        shard: tuple[int, int] | None = None,
        cuts_views: bool = False,
    ):
        check_store(store)
        group = zarr.open_group(str(store), mode="r")
        if split not in group:
            raise FileNotFoundError(f"{store} has no split {split!r}; rebuild it with the workflow")
        self.store, self.group = Path(store), group[split]
        self.photos = photo_split(group, store, split, cuts_views)  # None: the split holds the stored images
        fields = (*fields, "aspects") if self.photos else fields
        self.arrays = {f: self.group[f] for f in fields if f in self.group}
        for name, other in (aligned or {}).items():
            self.arrays[name], self.arrays[f"{name}_bias_labels"] = _aligned(other, split, self.group["ids"][:])
        self.fields = tuple(self.arrays)
        self.n = self.group["labels"].shape[0]
        self.batch_size, self.shuffle, self.drop_last = batch_size, shuffle, drop_last
        self.seed, self.name, self.prefetch = seed, name, prefetch
        self.pin_memory, self.max_batches = pin_memory, max_batches
        self.shard = shard  # (rank, world): `epoch` yields this process's share of each global batch
        images = self.group["images"]
        # One read unit = `read_chunks` consecutive chunks (shards for sharded arrays) in one call
        self.unit = (images.shards or images.chunks)[0] * read_chunks
        self.classes = list(group.attrs["classes"])
        # 1-D fields (labels) are tiny: always in memory. Image-like fields are cached if they fit.
        self._small = {f: a[:] for f, a in self.arrays.items() if a.ndim == 1}
        self._large = tuple(f for f in self.fields if f not in self._small)
        nbytes = sum(self.arrays[f].nbytes for f in self._large)
        # a streamed window: as many units as `window_gb` holds, and at least `units_per_class` per class
        self.window_reads = max(
            units_per_class * len(self.classes), 1, int(window_gb * 2**30 / max(nbytes / max(self.n, 1) * self.unit, 1))
        )
        self._cache = None
        if nbytes <= in_memory_max_gb * 2**30:
            self._cache = {**self._small, **{f: self.arrays[f][:] for f in self._large}}

    def renamed(self, name: str) -> ZarrBatches:
        """The same rows and batches under another `name`, which the epochs' shuffling follows (a
        prerequisite artifact several runs share shuffles by its own name, not by a run's)."""
        other = copy.copy(self)
        other.name = name
        return other

    def __len__(self) -> int:
        """Batches per epoch (at most `max_batches`)."""
        full = self.n // self.batch_size if self.drop_last else math.ceil(self.n / self.batch_size)
        return full if self.max_batches is None else min(full, self.max_batches)

    def epoch(self, epoch: int, steps: int | None = None) -> Iterator[dict[str, torch.Tensor]]:
        """Batches of epoch `epoch`: uint8 `images` (B, H, W, 3), int64 labels, row `index`; the
        first `steps` (default `max_batches`) of them if set (cut in the producer, so its thread ends)."""
        limit = len(self) if steps is None else min(steps, len(self))  # len: at most max_batches
        batches = itertools.islice(self._batches(epoch, self.shuffle, self.drop_last, self.shard), limit)
        yield from in_background(batches, self.prefetch)

    def in_order(self) -> Iterator[dict[str, torch.Tensor]]:
        """Every row once, in row order (the last batch may be short): for scoring the training set."""
        yield from in_background(self._batches(0, False, False), self.prefetch)

    def rows(self, index: np.ndarray) -> dict[str, torch.Tensor]:
        """The fields of the rows `index` (any order, repeats allowed), as one batch."""
        unique, inverse = np.unique(index, return_inverse=True)
        if self._cache is not None:
            data = {f: self._cache[f][unique] for f in self.fields}
        else:
            data = {
                f: self._small[f][unique] if f in self._small else self.arrays[f].oindex[unique] for f in self.fields
            }
        return self._gather({"index": unique, **data}, inverse)

    def column(self, field: str) -> np.ndarray:
        """A 1-D field (labels, bias labels) of every row, in row order."""
        return self._small[field]

    def _batches(
        self, epoch: int, shuffle: bool, drop_last: bool, shard: tuple[int, int] | None = None
    ) -> Iterator[dict[str, torch.Tensor]]:
        """The batches of `epoch` (the global ones, or with `shard` this process's share of each)."""
        rng = np.random.default_rng(name_seed("loader", self.name, self.seed, epoch))
        stop = self.n // self.batch_size * self.batch_size if drop_last else self.n
        if self._cache is not None:
            order = rng.permutation(self.n) if shuffle else np.arange(self.n)
            for start in range(0, stop, self.batch_size):
                rows = order[start : start + self.batch_size]
                yield self._gather(self._cache, rows[share(len(rows), shard)])
            return
        carry: list[dict[str, torch.Tensor]] = []  # rows left over from the previous window
        # the next window is read while batches are gathered from this one
        for window, order in in_background(self._windows(rng, shuffle), 1 if self.prefetch > 0 else 0):
            start = 0
            if carry:  # complete the straddling batch; only its own rows are copied
                need = self.batch_size - sum(len(c["index"]) for c in carry)
                carry.append(self._gather(window, order[:need]))
                start = min(need, len(order))
                if sum(len(c["index"]) for c in carry) < self.batch_size:
                    continue
                yield _joined(carry, shard)
                carry = []
            full = start + (len(order) - start) // self.batch_size * self.batch_size
            for begin in range(start, full, self.batch_size):
                rows = order[begin : begin + self.batch_size]
                yield self._gather(window, rows[share(len(rows), shard)])
            if full < len(order):
                carry = [self._gather(window, order[full:])]
        if carry and not drop_last:
            yield _joined(carry, shard)

    def _windows(self, rng: np.random.Generator, shuffle: bool) -> Iterator[tuple[dict[str, np.ndarray], np.ndarray]]:
        """(window data, order): `window_reads` read units dealt at random from the whole split,
        read in row order into one buffer with their row numbers, and a shuffled order of the
        buffer's rows."""
        starts = np.arange(0, self.n, self.unit)
        if shuffle:
            starts = rng.permutation(starts)
        for w in range(0, len(starts), self.window_reads):
            chosen = np.sort(starts[w : w + self.window_reads]) if shuffle else starts[w : w + self.window_reads]
            parts = [(s, min(self.n, s + self.unit)) for s in chosen]
            rows = np.concatenate([np.arange(a, b) for a, b in parts])
            window = {"index": rows, **{f: self._small[f][rows] for f in self._small}}
            for f in self._large:
                array = self.arrays[f]
                buf = np.empty((len(rows), *array.shape[1:]), array.dtype)
                offset = 0
                for a, b in parts:
                    buf[offset : offset + b - a] = array[a:b]
                    offset += b - a
                window[f] = buf
            yield window, (rng.permutation(len(rows)) if shuffle else np.arange(len(rows)))

    def _gather(self, data: dict[str, np.ndarray], rows: np.ndarray) -> dict[str, torch.Tensor]:
        index = data["index"][rows] if "index" in data else rows
        return self._to_torch({"index": index, **{f: data[f][rows] for f in self.fields}})

    def _to_torch(self, batch: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
        out = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in batch.items()}
        if self.pin_memory:
            out = {k: v.pin_memory() for k, v in out.items()}
        return out


class FirstRows(TypedDict):
    """`first_rows`' arguments of `ZarrBatches`."""

    batch_size: int
    max_batches: int | None


def first_rows(batch_size: int, limit: int | None) -> FirstRows:
    """`ZarrBatches` arguments that read the first `limit` rows in order (whole batches, so exactly
    `limit` when it is at most `batch_size`; every row with None): smoke mode's `evaluation.max_images`."""
    if limit is None:
        return {"batch_size": batch_size, "max_batches": None}
    batch_size = min(batch_size, limit)
    return {"batch_size": batch_size, "max_batches": math.ceil(limit / batch_size)}


def share(n: int, shard: tuple[int, int] | None) -> slice:
    """The contiguous block of a global batch of n rows that process `rank` of `world` (`shard`)
    trains on (`np.array_split`'s blocks); every row without a shard. Every process draws the
    same global order, so the blocks in rank order are the one-process batch."""
    if shard is None:
        return slice(0, n)
    rank, world = shard
    q, r = divmod(n, world)
    start = rank * q + min(rank, r)
    return slice(start, start + q + (rank < r))


def _joined(parts: list[dict[str, torch.Tensor]], shard: tuple[int, int] | None) -> dict[str, torch.Tensor]:
    """One batch from the pieces of a batch that straddles two read windows (this process's share)."""
    rows = share(sum(len(p["index"]) for p in parts), shard)
    return {k: torch.cat([p[k] for p in parts])[rows] for k in parts[0]}


def _aligned(store: Path | str, split: str, ids: np.ndarray) -> tuple[zarr.Array, zarr.Array]:
    """The `images` and `bias_labels` of another variant store whose rows are the same images in
    the same order (every variant of a dataset is written in the order of the segmented store)."""
    if not Path(store).exists():
        raise FileNotFoundError(f"{store} not found: build that variant first (the workflow's train rule does)")
    check_store(store)
    group = zarr.open_group(str(store), mode="r")
    if split not in group or not np.array_equal(group[split]["ids"][:], ids):
        raise ValueError(
            f"{store}/{split} does not hold the same images in the same order as the training store; "
            "build both variants from the same segmented store (same config and seed)"
        )
    return group[split]["images"], group[split]["bias_labels"]


def in_background(source: Iterator, depth: int) -> Iterator:
    """Run the iterator `source` in a thread, up to `depth` items ahead (inline for depth 0).
    Zarr decoding and numpy copies release the GIL, so this overlaps I/O with compute."""
    if depth <= 0:
        yield from source
        return
    q: queue.Queue = queue.Queue(maxsize=depth)
    done = object()

    def produce():
        try:
            for item in source:
                q.put(item)
        except BaseException as exc:  # re-raised in the consumer
            q.put(exc)
        q.put(done)

    threading.Thread(target=produce, daemon=True).start()
    while (item := q.get()) is not done:
        if isinstance(item, BaseException):
            raise item
        yield item
