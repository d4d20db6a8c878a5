"""One job of a grid (ReBias Table 1 style): every method of the grid trained on one train
variant with one seed, each run then evaluated on the dataset family's test sets.

The grid's networks are small; one process for all its methods saves a ~7 s interpreter and
torch start-up per run, which would otherwise cost as much as the runs themselves on a CPU.
Each run is written exactly as by the `train` and `evaluate` rules (model.pt,
train_metrics.jsonl, eval.jsonl under runs/<experiment>/seed<seed>/), and resumes from its
checkpoint after a kill.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from core.atomic import atomic_path

from . import distributed
from .evaluation import evaluate_run
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


def train_grid_runs(job_cfg: dict[str, Any], train_store: Path, test_stores: dict[str, Path],
                    runs_dir: Path) -> list[Path]:
    """Train and evaluate every run of a grid job (`workbench.slices.grid_job_config`: one
    train variant and seed, every method); returns the run dirs.
    `test_stores`: {test set name: store}, e.g. {"biased": rho_0.999, "unbiased": unbiased}."""
    run_dirs = []
    for run_cfg in job_cfg["runs"]:
        run_dir = runs_dir / run_cfg["experiment"] / f"seed{run_cfg['seed']}"
        monitor = run_monitor(run_cfg, test_stores)
        model = train(run_cfg, train_store, run_dir, monitor=monitor)
        if distributed.is_main():  # under torchrun every rank has the model; one writes its scores
            rows = evaluate_run(model, job_cfg["evaluation"], test_stores)
            with atomic_path(run_dir / "eval.jsonl") as tmp:
                tmp.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
        distributed.barrier()
        run_dirs.append(run_dir)
    return run_dirs
