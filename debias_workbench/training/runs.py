"""One training job: the runs of a pack (`workflow.config.packs`: one run, or several small ones
sharing a job), trained one after the other, or on a GPU several at once (`training.runs_per_gpu`),
each group in a process of its own. Each run is written under `<runs dir>/<experiment>/seed<seed>/`
(model.pt, train_metrics.jsonl) and resumes from its checkpoint after a kill or when it continues
in the next job (`job_time`); the `evaluate` job scores it afterwards and removes its checkpoint
(`run_files`)."""

from __future__ import annotations

import concurrent.futures
import multiprocessing
from collections.abc import Sequence
from pathlib import Path

import torch

from debias_workbench.training.run_config import RunConfig, TrainJobConfig

from .job_time import JobBudget, install_stop_signals, stop_signals_installed
from .prerequisites import files as prerequisite_files
from .trainer import Monitor, train


def run_monitor(run_cfg: RunConfig, test_stores: dict[str, Path]) -> Monitor | None:
    """With `model_selection`: every test set (or its `test_sets`) with its group accuracies every few steps (the
    report picks the validation-selected and the best-test point); else with `curves`: the one
    test set of the learning-curve figure; else none."""
    if selection := run_cfg.get("model_selection"):
        sets = selection.get("test_sets") or list(test_stores)  # `test_sets`: only those (the matrix's)
        return Monitor(
            {s: test_stores[s] for s in sets}, selection["every_steps"], selection["batch_size"], groups=True
        )
    if curves := run_cfg.get("curves"):
        return Monitor(
            {curves["test_set"]: test_stores[curves["test_set"]]}, curves["every_steps"], curves["batch_size"]
        )
    return None


def _train_group(
    runs: list[RunConfig],
    train_store: Path,
    aligned_stores: dict[str, Path],
    test_stores: dict[str, Path],
    runs_dir: Path,
    trackers: list[str],
    budget: JobBudget | None,
    threads: int,
    prerequisites: Path | None,
    stop_signals: bool = False,
) -> list[Path]:
    """`runs` trained one after the other, in this process or a spawned one (`stop_signals`: which
    then takes the job's stop signals as its parent does, `job_time.install_stop_signals`)."""
    if stop_signals:
        install_stop_signals()
    torch.set_num_threads(threads)  # the job's, in a spawned process too: float sums then add up in the same order
    return [
        train(
            run_cfg,
            train_store,
            runs_dir / run_cfg["experiment"] / f"seed{run_cfg['seed']}",
            aligned_stores,
            monitor=run_monitor(run_cfg, test_stores),
            trackers=trackers,
            budget=budget,
            prerequisites=None if prerequisites is None else prerequisite_files(prerequisites, run_cfg),
        )
        for run_cfg in runs
    ]


def train_runs(
    job_cfg: TrainJobConfig,
    train_store: Path,
    aligned_stores: dict[str, Path],
    test_stores: dict[str, Path],
    runs_dir: Path,
    trackers: Sequence[str] = (),
    budget: JobBudget | None = None,
    at_once: int = 1,
    prerequisites: Path | None = None,
) -> list[Path]:
    """Train every run of a job ({"runs": [run config, ...]}, `workflow.slices.run_config`); returns their
    model paths in the job's order. `aligned_stores`: {field: store} the methods read alongside the
    training store (CLAD's backgrounds); `test_stores`: {test set name: store}, read only by the runs'
    monitors; `trackers`: `training.trackers`; `budget`: the job's time (`job_time`), shared by its
    runs; `at_once` > 1: up to that many runs at a time, each in a spawned process with its share of
    the job's threads (a run's numbers are the same either way: each run seeds itself from its name and
    seed); `prerequisites`: the results folder under which the prerequisite jobs write their files
    (`training.prerequisites`), where the runs that need one read theirs (None: each makes its own in its
    set-up, the same one).

    A run that stops for the next job (`ContinueInNextJob`) fails the job, and the workflow removes
    the outputs of all its runs: the runs finished before it keep their checkpoints (every run does,
    until its scoring job: `run_files`), and the next job finishes them from their last epoch at once."""
    runs = job_cfg["runs"]
    workers = 1 if at_once <= 1 or len(runs) < 2 else min(at_once, len(runs))
    # the job's threads shared out: K processes each at the job's full count would ask K times its CPUs
    threads = max(1, torch.get_num_threads() // workers)
    args = (train_store, aligned_stores, test_stores, runs_dir, list(trackers), budget, threads, prerequisites)
    if workers == 1:
        return _train_group(runs, *args)
    context = multiprocessing.get_context("spawn")  # no CUDA state crosses into a child
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
        done = [pool.submit(_train_group, [run], *args, stop_signals_installed()) for run in runs]
        return [future.result()[0] for future in done]
