"""What the trainer and its loader read of a run's `training` section, as frozen settings with
every key the user left out filled from the schema's default (`core.schema_defaults`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from debias_workbench.core.schema_defaults import defaults


@dataclass(frozen=True)
class LoaderSettings:
    """`training.loader`: how the training split is read (`data.ZarrBatches`)."""

    read_chunks: int
    window_gb: float
    in_memory_max_gb: float
    prefetch_batches: int

    @classmethod
    def of(cls, loader: dict[str, Any] | None) -> LoaderSettings:
        return cls(**{**defaults("training_fields")["loader"], **(loader or {})})

    def batches_args(self) -> dict[str, Any]:
        """The keyword arguments of `data.ZarrBatches` these settings give."""
        return {"read_chunks": self.read_chunks, "window_gb": self.window_gb,
                "in_memory_max_gb": self.in_memory_max_gb, "prefetch": self.prefetch_batches}


@dataclass(frozen=True)
class TrainingSettings:
    """The run-level settings the trainer reads (the method reads its own: `methods.base.Method`)."""

    batch_size: int
    gpus: int
    amp: bool
    deterministic: bool
    sync_bn: bool
    steps_per_epoch: int | None
    loader: LoaderSettings

    @classmethod
    def of(cls, training: dict[str, Any]) -> TrainingSettings:
        filled = {**defaults("training_fields"), **training}
        return cls(batch_size=filled["batch_size"], gpus=filled["gpus"], amp=filled["amp"],
                   deterministic=filled["deterministic"], sync_bn=filled["sync_bn"],
                   steps_per_epoch=filled["steps_per_epoch"], loader=LoaderSettings.of(training.get("loader")))
