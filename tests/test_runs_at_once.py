"""Several runs of one job at once on a GPU (`training.runs_per_gpu`): the same weights as one after the
other, the job's request following the measured speedup, and the
setting reaching the jobs without naming it in a command or a run's identity."""

from __future__ import annotations

import copy

import pytest
import torch

from debias_workbench.core.names import RUNS_PER_GPU_VARIABLE
from debias_workbench.training.runs import train_runs
from debias_workbench.workflow import job_process, resources
from debias_workbench.workflow.config import ConfigError, resolve_config
from debias_workbench.workflow.cost import run_estimate, runs_at_once_speedup
from debias_workbench.workflow.slices import run_config


def _two_runs(default_config) -> list[dict]:
    cfg = copy.deepcopy(default_config)
    cfg["training"].update(epochs=1, batch_size=6)
    cfg["experiments"]["base_mr"].get("training", {}).pop("epochs", None)  # the demo trains its reference longer
    return [run_config(cfg, "base_in9", 0), run_config(cfg, "base_mr", 0)]


def test_runs_side_by_side_end_with_the_weights_of_runs_one_after_the_other(tmp_path, tiny_store, default_config):
    runs = _two_runs(default_config)
    alone = train_runs({"runs": runs}, tiny_store, {}, {}, tmp_path / "alone")
    together = train_runs({"runs": runs}, tiny_store, {}, {}, tmp_path / "together", at_once=2)
    assert [p.relative_to(tmp_path / "together") for p in together] == [p.relative_to(tmp_path / "alone") for p in alone]
    for a, b in zip(alone, together):
        sa, sb = torch.load(a)["state_dict"], torch.load(b)["state_dict"]
        assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_runs_side_by_side_share_their_jobs_threads(tmp_path, tiny_store, default_config):
    """Each of K runs at once takes 1/K of the job's threads (K processes at the job's full count would
    oversubscribe its CPUs: 3 x 8 threads on an 8-CPU request); one after the other, each takes them all."""
    runs, threads = _two_runs(default_config), torch.get_num_threads()
    torch.set_num_threads(4)
    try:
        alone = train_runs({"runs": runs[:1]}, tiny_store, {}, {}, tmp_path / "alone")
        together = train_runs({"runs": runs}, tiny_store, {}, {}, tmp_path / "together", at_once=2)
    finally:
        torch.set_num_threads(threads)
    assert ", 4 threads" in (alone[0].parent / "train.log").read_text()
    assert all(", 2 threads" in (p.parent / "train.log").read_text() for p in together)


def test_a_jobs_request_follows_the_measured_speedup_of_runs_at_once(default_config):
    runs = _two_runs(default_config) * 2                     # four runs, each its own process
    one, mem_one = resources.training(runs)
    three, mem_three = resources.training(runs, 3, 8)       # 8 CPUs: each of the three its busy threads
    assert runs_at_once_speedup(1) == 1.0 and runs_at_once_speedup(5) == runs_at_once_speedup(3) > 1.0
    assert three == pytest.approx(one / runs_at_once_speedup(3)) and mem_three == pytest.approx(3 * mem_one)
    longest = run_estimate(runs[0]).gpu_seconds / 60
    assert resources.training(runs[:1], 3) == (pytest.approx(longest), pytest.approx(mem_one))   # one run: as before


def test_runs_at_once_count_their_speedup_only_with_what_it_was_measured_with(default_config):
    """Three runs at once on a job of 1 CPU (the demo's training.threads) share it with six busy threads:
    the job still holds three runs' memory, but its minutes are the runs' one after the other, and the
    plan says why; a run that streams its split (measured in memory) counts no speedup either."""
    runs = _two_runs(default_config) * 2
    one, mem_one = resources.training(runs)
    need = 3 * max(resources.busy_threads(r) for r in runs)
    assert need == 6                                         # kernel launches and the loader's reading, each run
    starved, mem_starved = resources.training(runs, 3, need - 1)
    assert starved == pytest.approx(one) and mem_starved == pytest.approx(3 * mem_one)
    assert "not counted" in resources.runs_at_once(runs, 3, need - 1).note
    assert resources.runs_at_once(runs, 3, need).credited == 3
    streamed = copy.deepcopy(runs)
    for run in streamed:
        run["training"]["loader"] = {**run["training"].get("loader", {}), "in_memory_max_gb": 0.0}
    assert resources.streams(streamed[0]) and not resources.streams(runs[0])
    shared = resources.runs_at_once(streamed, 3, 64)
    assert (shared.at_once, shared.credited) == (3, 1) and "streams" in shared.note


def test_runs_per_gpu_reaches_the_jobs_through_the_environment_and_only_from_the_top(default_config):
    assert job_process.training_environment({"runs_per_gpu": 3})[RUNS_PER_GPU_VARIABLE] == "3"
    cfg = copy.deepcopy(default_config)
    cfg["training"]["runs_per_gpu"] = 3
    assert run_config(resolve_config(cfg), "base_in9", 0) == run_config(resolve_config(default_config), "base_in9", 0)
    cfg["experiments"]["clad"]["training"] = {"runs_per_gpu": 2}
    with pytest.raises(ConfigError, match=r"experiments.clad.training.runs_per_gpu: set runs_per_gpu in the top-level"):
        resolve_config(cfg)
