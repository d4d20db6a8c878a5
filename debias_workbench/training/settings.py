"""What the trainer and its loader read of a run's `training` section, as frozen settings with
every key the user left out filled from the schema's default (`core.schema_defaults`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from debias_workbench.core.schema_defaults import defaults, filled


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
        return {
            "read_chunks": self.read_chunks,
            "window_gb": self.window_gb,
            "in_memory_max_gb": self.in_memory_max_gb,
            "prefetch": self.prefetch_batches,
        }


@dataclass(frozen=True)
class OptimizerSettings:
    """`training.optimizer` (`methods.base.Method.make_optimizer`)."""

    name: str
    lr: float
    momentum: float
    weight_decay: float

    @classmethod
    def of(cls, optimizer: dict[str, Any] | None) -> OptimizerSettings:
        return cls(**filled("training_fields", "optimizer", optimizer))


@dataclass(frozen=True)
class ScheduleSettings:
    """`training.schedule`, stepped once per epoch (`trainer.make_schedulers`)."""

    name: str
    milestones: tuple[int, ...]
    gamma: float

    @classmethod
    def of(cls, schedule: dict[str, Any] | None) -> ScheduleSettings:
        values = filled("training_fields", "schedule", schedule)
        return cls(**{**values, "milestones": tuple(values["milestones"])})


@dataclass(frozen=True)
class AugmentSettings:
    """`training.augment`: the training crops and flip (`augment.Augmenter`)."""

    crop_scale: tuple[float, float]
    hflip: bool
    crop_padding: int

    @classmethod
    def of(cls, augment: dict[str, Any] | None) -> AugmentSettings:
        values = filled("training_fields", "augment", augment)
        return cls(
            crop_scale=tuple(values["crop_scale"]),
            hflip=bool(values["hflip"]),
            crop_padding=int(values["crop_padding"]),
        )


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
        return cls(
            batch_size=filled["batch_size"],
            gpus=filled["gpus"],
            amp=filled["amp"],
            deterministic=filled["deterministic"],
            sync_bn=filled["sync_bn"],
            steps_per_epoch=filled["steps_per_epoch"],
            loader=LoaderSettings.of(training.get("loader")),
        )
