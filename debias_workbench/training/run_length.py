"""How long a run is, in epochs and optimiser steps, and whether a method's switches fall inside it.

Torch-free: the config check (`workflow.config`) and the cost model read it before any job starts,
and the trainer with the real number of batches per epoch. A run lasts `training.epochs` epochs, or,
where the paper counts iterations (BiasEnsemble and Park et al.: 50K), exactly `training.iterations`
steps: ceil(iterations / steps per epoch) epochs, the last one cut short. A method argument declared
`x-within-run: iterations` (Park et al.'s T1, T2) names a point of the run; one at or past the run's
end would never switch on, so both checks stop it. One declared `x-before-run: epochs`
(LearnedMixin+H's G pre-training, which the ReBias authors run before F's epochs: clovaai/rebias
trainer.py:248-266, 384) adds that many epochs of steps before the run's own, outside its schedule.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RunLength:
    """The run's own epochs and steps (those its schedule counts), and the `pre_steps` before them.

    The trainer's loop runs `loop_epochs`: first `pre_epochs` epochs of the pre-training (the last
    one cut short), then the run's `epochs`; loop epochs count from 0 through both."""

    epochs: int
    steps: int  # optimiser steps of the run's own epochs
    steps_per_epoch: int
    pre_steps: int = 0  # steps before the run's epochs (`x-before-run`), outside its schedule

    @property
    def pre_epochs(self) -> int:
        return math.ceil(self.pre_steps / self.steps_per_epoch)

    @property
    def loop_epochs(self) -> int:
        return self.pre_epochs + self.epochs

    @property
    def all_steps(self) -> int:
        return self.pre_steps + self.steps

    def steps_in_epoch(self, epoch: int) -> int:
        """Steps of loop epoch `epoch` (the last pre-training epoch, and the last one of an
        `iterations` run, are cut short)."""
        if epoch < self.pre_epochs:
            return min(self.steps_per_epoch, self.pre_steps - epoch * self.steps_per_epoch)
        return min(self.steps_per_epoch, self.steps - (epoch - self.pre_epochs) * self.steps_per_epoch)

    def steps_before(self, epoch: int, within: int = 0) -> int:
        """Steps taken before loop epoch `epoch`, and `within` of its own (a checkpoint's place in the run)."""
        return sum(self.steps_in_epoch(e) for e in range(epoch)) + within


def run_length(training: Mapping[str, Any], steps_per_epoch: int, pre_epochs: float = 0.0) -> RunLength:
    """The run's length with `steps_per_epoch` batches an epoch (`training.iterations` if set, else
    epochs), after `pre_epochs` epochs of pre-training (fractions count steps, rounded)."""
    steps_per_epoch = max(1, steps_per_epoch)
    pre_steps = round(pre_epochs * steps_per_epoch)
    if training.get("iterations"):
        iterations = int(training["iterations"])
        return RunLength(math.ceil(iterations / steps_per_epoch), iterations, steps_per_epoch, pre_steps)
    return RunLength(int(training["epochs"]), int(training["epochs"]) * steps_per_epoch, steps_per_epoch, pre_steps)


def switches_outside(
    method_args: Mapping[str, Any], within_run: Mapping[str, str], length: RunLength
) -> dict[str, str]:
    """{arg: "t2 = 10000 is not inside the run's 7,500 iterations"} for each switch at or past the run's end."""
    out = {}
    for arg, unit in within_run.items():
        value = method_args.get(arg)
        limit = length.steps if unit == "iterations" else length.epochs
        if value is not None and value >= limit:
            out[arg] = f"{arg} = {value} is not inside the run's {limit:,} {unit}"
    return out
