"""How long a run is, in epochs and optimiser steps, and whether a method's switches fall inside it.

Torch-free: the config check (`workflow.config`) reads it before any job starts, and the trainer
with the real number of batches per epoch. A run lasts `training.epochs` epochs, or, where the paper
counts iterations (BiasEnsemble and Park et al.: 50K), exactly `training.iterations` steps:
ceil(iterations / steps per epoch) epochs, the last one cut short. A method argument declared
`x-within-run: iterations` (Park et al.'s T1, T2) or `epochs` (LearnedMixin's G pre-training)
names a point of the run; one at or past the run's end would never switch on, so both checks stop it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RunLength:
    epochs: int
    steps: int           # optimiser steps in all
    steps_per_epoch: int

    def steps_in_epoch(self, epoch: int) -> int:
        """Steps of epoch `epoch` (the last one of an `iterations` run is cut short)."""
        return min(self.steps_per_epoch, self.steps - epoch * self.steps_per_epoch)


def run_length(training: Mapping[str, Any], steps_per_epoch: int) -> RunLength:
    """The run's length with `steps_per_epoch` batches an epoch (`training.iterations` if set, else epochs)."""
    steps_per_epoch = max(1, steps_per_epoch)
    if training.get("iterations"):
        iterations = int(training["iterations"])
        return RunLength(math.ceil(iterations / steps_per_epoch), iterations, steps_per_epoch)
    return RunLength(int(training["epochs"]), int(training["epochs"]) * steps_per_epoch, steps_per_epoch)


def switches_outside(method_args: Mapping[str, Any], within_run: Mapping[str, str],
                     length: RunLength) -> dict[str, str]:
    """{arg: "t2 = 10000 is not inside the run's 7,500 iterations"} for each switch at or past the run's end."""
    out = {}
    for arg, unit in within_run.items():
        value = method_args.get(arg)
        limit = length.steps if unit == "iterations" else length.epochs
        if value is not None and value >= limit:
            out[arg] = f"{arg} = {value} is not inside the run's {limit:,} {unit}"
    return out
