"""How far a run is, for a log nobody watches live: a cluster job's output file.

tqdm's bar is off when the output is not a terminal (a SLURM job's log), and the trainer's epoch line
can be an hour apart on ImageNet-scale epochs on a slow card; so at most every `every_seconds` of
wall time, and at the end of every epoch, the trainer prints the run's step of its total and the
time left at the speed of this process's steps so far (a resumed run counts the steps it resumed
past as done, not as fast)."""

from __future__ import annotations

import time
from collections.abc import Callable

#: at most this long between two progress lines in a job's log
PROGRESS_EVERY_S = 120.0


def duration(seconds: float) -> str:
    """`1 h 05 min`, `4 min 10 s` or `12 s`."""
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes:02d} min"
    return f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"


class Progress:
    """The run's step of `total` (starting at `done`, the steps of a resumed checkpoint) and the
    time left; `tick` after every step returns a line once `every_seconds` have passed since the last."""

    def __init__(
        self,
        total: int,
        done: int = 0,
        every_seconds: float = PROGRESS_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.total, self.done, self.every, self.clock = total, done, every_seconds, clock
        self.start_done, self.start = done, clock()
        self.last = self.start

    def line(self) -> str:
        """`step 1,200 of 50,000 (2.4 %), 3.1 steps/s, about 4 h 22 min left`."""
        elapsed, stepped = self.clock() - self.start, self.done - self.start_done
        text = f"step {self.done:,} of {self.total:,} ({100 * self.done / max(1, self.total):.1f} %)"
        if stepped and elapsed > 0:
            rate = stepped / elapsed
            text += f", {rate:.3g} steps/s, about {duration((self.total - self.done) / rate)} left"
        return text

    def tick(self, steps: int = 1) -> str | None:
        """Count `steps` more; the progress line if `every_seconds` passed since the last one, else None."""
        self.done += steps
        now = self.clock()
        if now - self.last < self.every:
            return None
        self.last = now
        return self.line()
