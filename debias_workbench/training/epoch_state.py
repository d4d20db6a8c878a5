"""An epoch under way, as the trainer keeps it between steps, so that a job the scheduler ends
mid-epoch (`job_time.STOP_SIGNALS`) checkpoints at a step boundary and the next job resumes at the
next step with the weights, metrics and augmentations of an uninterrupted run.

Everything else a step changes is in the checkpoint already: the method's state dict holds every
per-sample and step-count buffer (`methods.base.Method.count_step`), the optimisers and schedulers
theirs (a scheduler steps at the epoch's end). What the epoch itself holds is here: how many steps
it has taken (the loader's batches of an epoch are a fixed order, `data.ZarrBatches.epoch`, so the
next job skips that many), the augmentation generator's state (seeded at the epoch's start), the
sums and counts of the epoch's statistics, the statistics since the last monitor point and the
monitor's rows so far. Sums are float64 on the device or host numbers; they are saved as Python
floats, which hold a float64 exactly, so the resumed sums add up bit for bit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch


class StopMidEpoch(Exception):
    """A stop signal arrived during an epoch: `epoch` holds it at its last step boundary."""

    def __init__(self, epoch: EpochState, signal_name: str):
        super().__init__(signal_name)
        self.epoch, self.signal_name = epoch, signal_name


@dataclass
class EpochState:
    """One epoch's steps so far (see the module)."""

    steps: int = 0
    sums: dict[str, torch.Tensor | float] = field(default_factory=dict)  # device tensors or host numbers
    counts: dict[str, int] = field(default_factory=dict)  # a statistic may be logged by some steps only
    interval: dict[str, list[torch.Tensor | float]] = field(default_factory=dict)  # since the last curve point
    rows: list[dict] = field(default_factory=list)  # the monitor's points of this epoch
    generator: torch.Tensor | None = None  # the augmentation generator's state (only in a checkpoint)

    def add(self, stats: Mapping[str, Any]) -> None:
        """One step's statistics: a device tensor stays there (float64: the sum a Python float
        would give), read once an epoch; a host number stays a host number."""
        for key, value in stats.items():
            value = value.double() if isinstance(value, torch.Tensor) else float(value)
            self.sums[key] = self.sums.get(key, 0.0) + value
            self.counts[key] = self.counts.get(key, 0) + 1
            self.interval.setdefault(key, []).append(value)
        self.steps += 1

    def saved(self, generator: torch.Generator) -> dict[str, Any]:
        """The epoch as the checkpoint keeps it, with `generator`'s state (a device read, once)."""
        return {
            "steps": self.steps,
            "sums": {k: float(v) for k, v in self.sums.items()},
            "counts": dict(self.counts),
            "interval": {k: [float(v) for v in values] for k, values in self.interval.items()},
            "rows": list(self.rows),
            "generator": generator.get_state(),
        }

    @classmethod
    def loaded(cls, saved: dict[str, Any]) -> EpochState:
        """The epoch `saved` kept (its generator state to restore after the epoch's seeding)."""
        return cls(
            saved["steps"],
            dict(saved["sums"]),
            dict(saved["counts"]),
            {k: list(v) for k, v in saved["interval"].items()},
            list(saved["rows"]),
            saved["generator"],
        )
