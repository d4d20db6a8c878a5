"""How long the job training a run may still go on, so that a run longer than one job
(`cluster.max_job_hours`) stops at an epoch boundary and continues in the next job.

On SLURM the job reads its end from `SLURM_JOB_END_TIME` (the Unix time SLURM sets in the job's
environment), else asks the scheduler for its time left (`squeue -j $SLURM_JOB_ID -o %L`): that is
the limit the job really has, whatever set it (the cost model's request, a profile's
`set-resources`, a site's default). A job that learns neither trains without a budget and says so
in its log: it cannot stop in time, and if the scheduler ends it, the epoch under way is lost (the
retry resumes from the last epoch checkpoint). Elsewhere (a local run, a job without a limit)
there is no budget and a run trains to its end. Before every epoch but the first of a job, the
trainer asks `JobBudget.must_stop`: when the time left is under the longest epoch this job has
trained plus `STOP_MARGIN_SECONDS`, it keeps its last epoch checkpoint and ends the job with
`CONTINUE_EXIT_CODE`; the workflow retries the job (the train rules' `retries`, from the cost
model: `workflow.resources.continuation_retries`) and the next attempt resumes from the checkpoint.
Every job trains at least one epoch, so a job limit shorter than an epoch still makes progress.

The scheduler can also end a job the budget did not foresee (an epoch slower than the longest so
far, a job without a budget, a preemption): the train rules ask SLURM for a warning signal
(`sbatch --signal=USR1@WARNING_SECONDS`, `workflow.resources.slurm_warning`), and SLURM sends SIGTERM
at the time limit itself, `KillWait` (30 s by default) before it kills. The `train` command takes
both (`install_stop_signals`): the trainer then checkpoints at its next step boundary, mid-epoch
where it runs as one process, and ends the job with `CONTINUE_EXIT_CODE`; the next job resumes that
step with the same weights as an uninterrupted run.
Torch-free: read by the `train` command before torch is imported.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

#: what a job leaves unused at its stop besides the next epoch: the process's exit, the job step's
#: wrap-up, and an epoch slower than the longest so far
STOP_MARGIN_SECONDS = 300.0
#: a training job that stopped to continue in the next job exits with this (EX_TEMPFAIL of
#: sysexits.h: "try again later"); under `torch.distributed.run` the launcher reports its own code
CONTINUE_EXIT_CODE = 75


#: how long before a job's end SLURM sends the warning signal (USR1): a step and a checkpoint fit in
#: it, and it is under `STOP_MARGIN_SECONDS`, so a budgeted job whose epochs keep their pace stops
#: at an epoch boundary before it
WARNING_SECONDS = 180
#: the signals on which a training job stops at its next step to continue in the next job: SLURM's
#: warning signal, and SIGTERM (the time limit, a preemption, `scancel`)
STOP_SIGNALS = (signal.SIGUSR1, signal.SIGTERM)
#: the names of the stop signals this process has received (`install_stop_signals`)
_RECEIVED: list[str] = []

#: what `squeue -o %L` prints for a job without a time limit (no budget, and nothing to warn about)
NO_LIMIT = ("UNLIMITED", "NOT_SET")


class ContinueInNextJob(Exception):
    """The run stopped at an epoch boundary, its checkpoint written: the next job continues it."""


@dataclass
class JobBudget:
    """The wall time of one job: its end (`deadline`, on `clock`'s scale) and the longest epoch it
    has trained (None before its first, which always runs)."""

    deadline: float
    clock: Callable[[], float] = time.monotonic
    longest_epoch: float | None = None

    def left(self) -> float:
        """Seconds until the scheduler ends the job."""
        return self.deadline - self.clock()

    def record(self, seconds: float) -> None:
        """An epoch (with its checkpoint) took `seconds`."""
        self.longest_epoch = max(seconds, self.longest_epoch or 0.0)

    def must_stop(self, ahead: float | None = None) -> bool:
        """Whether `ahead` seconds of work (default: another epoch as long as the longest so far) might not
        end, with `STOP_MARGIN_SECONDS` to spare, before the job does; never before the job's first epoch."""
        if self.longest_epoch is None:
            return False
        return self.left() < (self.longest_epoch if ahead is None else ahead) + STOP_MARGIN_SECONDS


def install_stop_signals(environ: Mapping[str, str] = os.environ) -> None:
    """Inside a SLURM job (`SLURM_JOB_ID`), take `STOP_SIGNALS` in this process: each is noted
    (`stop_requested`) for the trainer, which checkpoints at its next step and ends the job to
    continue, instead of dying mid-step. Only the `train` command's processes, and only on SLURM: a
    local run's SIGTERM (Snakemake ending a job), a test or a notebook keep the signals' usual meaning."""
    if environ.get("SLURM_JOB_ID"):
        for sig in STOP_SIGNALS:
            signal.signal(sig, _note_signal)


def stop_signals_installed() -> bool:
    """Whether this process takes the stop signals (its child processes must install them anew)."""
    return signal.getsignal(STOP_SIGNALS[0]) is _note_signal


def _note_signal(signum: int, _frame: object) -> None:
    name = signal.Signals(signum).name
    if name not in _RECEIVED:
        print(f"received {name}: the scheduler ends this job soon; stopping at the next step", flush=True)
        _RECEIVED.append(name)


def stop_requested() -> str | None:
    """The first stop signal this process received (its name), or None."""
    return _RECEIVED[0] if _RECEIVED else None


def slurm_seconds(text: str) -> int | None:
    """Seconds of a SLURM duration (`squeue`'s `%L`: `MM:SS`, `H:MM:SS`, `D-HH:MM:SS`); None for
    `UNLIMITED`, `NOT_SET`, `INVALID` or anything else."""
    days, _, clock = text.strip().rpartition("-")
    parts = clock.split(":")
    if not 1 <= len(parts) <= 3 or not all(p.isdigit() for p in parts) or (days and not days.isdigit()):
        return None
    seconds = 0
    for part in parts:
        seconds = seconds * 60 + int(part)
    return int(days or 0) * 86400 + seconds


def job_budget(
    environ: Mapping[str, str] = os.environ,
    clock: Callable[[], float] = time.monotonic,
    run: Callable[..., subprocess.CompletedProcess] = subprocess.run,
    wall: Callable[[], float] = time.time,
) -> JobBudget | None:
    """This process's job budget: inside a SLURM job (`SLURM_JOB_ID`) from `SLURM_JOB_END_TIME`
    (compared with the `wall` clock), else from `squeue`; None outside SLURM or for a job without
    a time limit. A failed query is a warning saying what it costs, and no budget."""
    job = environ.get("SLURM_JOB_ID")
    if not job:
        return None
    end = environ.get("SLURM_JOB_END_TIME", "")
    if end.isdigit() and int(end) > 0:
        return JobBudget(clock() + int(end) - wall(), clock)
    try:
        out = run(["squeue", "-h", "-j", job, "-o", "%L"], capture_output=True, text=True, timeout=60, check=True)
    except (OSError, subprocess.SubprocessError) as exc:
        _no_budget(job, str(exc))
        return None
    left = slurm_seconds(out.stdout)
    if left is None and out.stdout.strip() not in NO_LIMIT:
        _no_budget(job, f"squeue answered {out.stdout.strip()!r}")
    return None if left is None else JobBudget(clock() + left, clock)


def _no_budget(job: str, why: str) -> None:
    """Warn that the job trains without a budget, and what that costs."""
    print(
        f"warning: cannot learn SLURM job {job}'s time left ({why}; SLURM_JOB_END_TIME is not set): training "
        "without a time budget, so the run cannot stop in time to continue in the next job; if the scheduler "
        "ends this job at its time limit, the epoch under way is lost and the retry resumes from the last "
        "epoch checkpoint",
        file=sys.stderr,
        flush=True,
    )
