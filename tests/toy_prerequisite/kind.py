"""The toy kind: the class counts of a training store's labels, built by a job of its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from debias_workbench.training.prerequisite_kind import PrerequisiteCost, PrerequisiteKind

CLASS_COUNTS = PrerequisiteKind(
    name="class_counts",
    args=("prior_passes",),
    builder="tests.toy_prerequisite.kind:build",
    cost=PrerequisiteCost(steps="prior_passes"),
    description="the training labels' class counts",
)


def build(job_cfg: dict[str, Any], train_store: Path, out: Path) -> None:
    """Count each class of `train_store`'s training labels into `out` (a tensor file)."""
    import numpy as np
    import torch
    import zarr

    from debias_workbench.core.atomic import atomic_path

    labels = np.asarray(zarr.open_group(str(train_store), mode="r")["train/labels"][:])
    with atomic_path(out) as tmp:
        torch.save({"counts": torch.from_numpy(np.bincount(labels)), "job": job_cfg[CLASS_COUNTS.name]}, tmp)
