"""One training job: the runs of a pack (`workflow.config.packs`: one run, or several small ones
sharing a process), trained one after the other. Each run is written under
`<runs dir>/<experiment>/seed<seed>/` (model.pt, train_metrics.jsonl) and resumes from its
checkpoint after a kill or when it continues in the next job (`job_time`); the `evaluate` job
scores it afterwards."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import distributed
from .job_time import JobBudget
from .trainer import Monitor, train


def run_monitor(run_cfg: dict[str, Any], test_stores: dict[str, Path]) -> Monitor | None:
    """With `model_selection`: every test set with its group accuracies every few steps (the
    report picks the validation-selected and the best-test point); else with `curves`: the one
    test set of the learning-curve figure; else none."""
    if selection := run_cfg.get("model_selection"):
        return Monitor(dict(test_stores), selection["every_steps"], selection["batch_size"], groups=True)
    if curves := run_cfg.get("curves"):
        return Monitor({curves["test_set"]: test_stores[curves["test_set"]]}, curves["every_steps"], curves["batch_size"])
    return None


def train_runs(job_cfg: dict[str, Any], train_store: Path, aligned_stores: dict[str, Path],
               test_stores: dict[str, Path], runs_dir: Path, trackers: list[str] = (),
               budget: JobBudget | None = None) -> list[Path]:
    """Train every run of a job ({"runs": [run config, ...]}, `workflow.slices.run_config`); returns their model paths.
    `aligned_stores`: {field: store} the methods read alongside the training store (CLAD's
    backgrounds); `test_stores`: {test set name: store}, read only by the runs' monitors;
    `trackers`: `training.trackers`; `budget`: the job's time (`job_time`), shared by its runs.

    A run that stops for the next job (`ContinueInNextJob`) fails the job, and the workflow removes
    the outputs of all its runs: so the runs finished before it keep their last checkpoint (the next
    job finishes them from it at once), and the checkpoints go only once every run is done."""
    run_dirs = [runs_dir / run_cfg["experiment"] / f"seed{run_cfg['seed']}" for run_cfg in job_cfg["runs"]]
    several = len(run_dirs) > 1
    models = [train(run_cfg, train_store, run_dir, aligned_stores, monitor=run_monitor(run_cfg, test_stores),
                    trackers=trackers, budget=budget, keep_checkpoint=several)
              for run_cfg, run_dir in zip(job_cfg["runs"], run_dirs)]
    if several and distributed.is_main():
        for run_dir in run_dirs:
            (run_dir / "checkpoint.pt").unlink(missing_ok=True)
    return models
