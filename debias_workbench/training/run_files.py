"""What a run's folder keeps between the attempts of its training job, beside the job's declared
outputs (`model.pt`, `train_metrics.jsonl`: Snakemake removes them when an attempt fails) and its
declared log (Snakemake removes that before every attempt, `Job.remove_existing_output`):

* `checkpoint.pt`, the trainer's last epoch, and `checkpoint.json`, its progress (the steps done of
  the run's steps, the run's config hash): read without torch by the workflow, so that a retried or
  continued job asks the scheduler for the work left, not for the whole run (`workflow.resources`).
* `train.log`, the run's own log: every attempt appends to it, under a header line naming when and
  where it started (host, SLURM job and its restart count), and ends it with a line saying how the
  attempt ended (done, stopped for the next job, or the error), so the history of a run trained
  over several jobs (or failed and retried) is in one place.

Both stay when `model.pt` is written: the job can still fail after that (Snakemake's wait for the
files on a shared file system, a node lost while the job step ends) and the next attempt then ends
the run from its last epoch instead of retraining it from zero. The scoring job, which runs only
once Snakemake has accepted the training job's outputs, removes them (`release_checkpoint`).
Torch-free: the workflow's resources read it when they plan a job.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Mapping
from pathlib import Path

from debias_workbench.core.atomic import write_json

from .job_time import CONTINUE_EXIT_CODE, ContinueInNextJob

#: the trainer's checkpoint of a run's last epoch
CHECKPOINT = "checkpoint.pt"
#: the checkpoint's progress, read without torch
PROGRESS = "checkpoint.json"
#: the run's own log, appended by every attempt
RUN_LOG = "train.log"


def write_progress(run_dir: Path, steps_done: int, all_steps: int, run_hash: str) -> None:
    """Record (atomically) that the checkpoint beside it holds `steps_done` of the run's `all_steps`."""
    write_json(run_dir / PROGRESS, {"steps_done": steps_done, "all_steps": all_steps, "config_hash": run_hash})


def fraction_done(run_dir: Path, run_hash: str) -> float:
    """The part of the run (0 to 1) its checkpoint holds: 0 without one, or with one made with
    another config (the trainer starts such a run over) or unreadable."""
    try:
        progress = json.loads((run_dir / PROGRESS).read_text())
        if progress["config_hash"] != run_hash or not (run_dir / CHECKPOINT).exists():
            return 0.0
        return min(1.0, max(0.0, progress["steps_done"] / max(1, progress["all_steps"])))
    except (OSError, ValueError, KeyError, TypeError):
        return 0.0


def release_checkpoint(run_dir: Path) -> None:
    """Remove a finished run's checkpoint and its progress, once its outputs are accepted (a
    paper-scale ResNet-50's checkpoint is 300 MB, and a forced rerun should train the run again,
    not end it from its last epoch)."""
    (run_dir / CHECKPOINT).unlink(missing_ok=True)
    (run_dir / PROGRESS).unlink(missing_ok=True)


def attempt_header(environ: Mapping[str, str] = os.environ) -> str:
    """`== attempt started 2026-11-29 11:52:03 UTC on node7 (SLURM job 4242, restart 1), pid 311, 8 threads`
    (the process's torch threads: runs side by side share their job's)."""
    import torch  # here, not at the top: the workflow layer reads this module's files without torch

    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    where = socket.gethostname()
    if job := environ.get("SLURM_JOB_ID"):
        where += f" (SLURM job {job}, restart {environ.get('SLURM_RESTART_COUNT', '0')})"
    return f"== attempt started {when} on {where}, pid {os.getpid()}, {torch.get_num_threads()} threads"


class RunLog:
    """The run's lines, to the job's output (its Snakemake log, replaced at every attempt) and
    appended to the run's `train.log` (kept across attempts); with `main` False (a process other
    than rank 0 of a run on several GPUs) nothing: rank 0 speaks for the run."""

    def __init__(self, run_dir: Path, prefix: str, main: bool = True):
        self.path, self.prefix, self.main = run_dir / RUN_LOG, prefix, main

    def _append(self, line: str) -> None:
        if self.main:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a") as fh:
                fh.write(line + "\n")

    def start(self) -> None:
        """The attempt's header line (only in `train.log`: the job's log starts with its own)."""
        self._append(attempt_header())

    def say(self, line: str, after: str = ": ") -> None:
        """`line`, after the run's name and `after`, to the job's output and the run's log."""
        text = f"{self.prefix}{after}{line}"
        if self.main:
            print(text, flush=True)
        self._append(text)

    def end(self, error: BaseException | None = None) -> None:
        """The attempt's last line: done (no `error`), stopped for the next job, or the error that ended it."""
        if error is None:
            outcome = "done"
        elif isinstance(error, ContinueInNextJob):
            outcome = f"stopped to continue in the next job (exit {CONTINUE_EXIT_CODE})"
        else:
            outcome = f"failed: {type(error).__name__}: {error}".rstrip(": ")
        self._append(f"== attempt ended: {outcome}")
