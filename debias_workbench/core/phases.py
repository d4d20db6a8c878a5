"""CPU seconds of a job's phases, so that `benchmarks/demo_rules.py` can say where a workflow's time
goes besides arithmetic: the interpreter and its imports, store checks, set-up (building the
method, its set-up such as a prerequisite it makes itself, resuming), epochs, scoring, saving.

A job wraps each phase in `phase(name)` and prints `summary()` as its last log line
(`PHASES_LINE` followed by a JSON object); whatever the phases leave out is "other". CPU time is
the process's (`time.process_time`: every thread of it), which is what a core spends on the job.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager

#: the start of the log line holding a job's phase times
PHASES_LINE = "cpu seconds by phase:"

_totals: dict[str, float] = defaultdict(float)


@contextmanager
def phase(name: str) -> Iterator[None]:
    """Add the CPU seconds spent inside the block to phase `name` (phases nest: an inner one's
    time is taken out of the outer's)."""
    start, before = time.process_time(), sum(_totals.values())
    try:
        yield
    finally:
        inner = sum(_totals.values()) - before
        _totals[name] += time.process_time() - start - inner


def summary(imports: float) -> str:
    """`PHASES_LINE` and the JSON object {phase: CPU seconds}: `imports` (the CPU the process had
    spent when its entry point started: the interpreter and the modules it loaded), the phases
    measured, and "other" (the rest of the process's CPU so far)."""
    measured = {**_totals, "imports": imports + _totals.get("imports", 0.0)}  # and the imports done on first use
    other = time.process_time() - sum(measured.values())
    return f"{PHASES_LINE} " + json.dumps({k: round(v, 3) for k, v in {**measured, "other": other}.items()})
