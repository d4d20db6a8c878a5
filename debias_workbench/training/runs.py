"""One training job: the runs of a pack (`workflow.config.packs`: one run, or several small ones
sharing a process), trained one after the other. Each run is written under
`<runs dir>/<experiment>/seed<seed>/` (model.pt, train_metrics.jsonl) and resumes from its
checkpoint after a kill; the `evaluate` job scores it afterwards."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
               test_stores: dict[str, Path], runs_dir: Path, trackers: list[str] = ()) -> list[Path]:
    """Train every run of a job ({"runs": [run config, ...]}, `workflow.slices.run_config`); returns their model paths.
    `aligned_stores`: {field: store} the methods read alongside the training store (CLAD's
    backgrounds); `test_stores`: {test set name: store}, read only by the runs' monitors;
    `trackers`: `training.trackers`."""
    return [train(run_cfg, train_store, runs_dir / run_cfg["experiment"] / f"seed{run_cfg['seed']}", aligned_stores,
                  monitor=run_monitor(run_cfg, test_stores), trackers=trackers)
            for run_cfg in job_cfg["runs"]]
