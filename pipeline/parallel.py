"""Run independent blocks of work with dask, with a progress bar.

Blocks are fixed by the data (one per zarr shard), never by the worker count, and each
block writes its own shard: results are byte-identical for any number of workers.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import dask
from dask.diagnostics import ProgressBar


def run_blocks(fn: Callable[..., Any], blocks: Sequence[tuple], workers: int, label: str) -> list[Any]:
    """`[fn(*args) for args in blocks]`, on `workers` processes (synchronously for 1)."""
    tasks = [dask.delayed(fn)(*args) for args in blocks]
    scheduler = "synchronous" if workers <= 1 else "processes"
    print(f"{label}: {len(tasks)} blocks on {workers} worker(s)", flush=True)
    with ProgressBar(minimum=1.0, dt=1.0):
        # chunksize=1: a block is seconds of work, and dask's default batches 6 blocks per
        # submission, which leaves workers idle when there are few blocks.
        return list(dask.compute(*tasks, scheduler=scheduler, num_workers=max(1, workers), chunksize=1))


def worker_setup() -> None:
    """Called at the start of every block: one OpenCV thread per worker process, as the
    parallelism is across blocks (nested threading only oversubscribes the cores)."""
    import cv2

    cv2.setNumThreads(1)
