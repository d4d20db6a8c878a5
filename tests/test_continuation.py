"""Runs longer than a job (issue 50), without a scheduler: the trainer stops at an epoch boundary
when its job's time budget has no room for another epoch, the next job resumes it, and the run ends
with the uninterrupted run's weights; a job of several runs keeps the finished ones' checkpoints
(every run keeps its own until its scoring job: test_scheduler_survival.py); the `train` command reads its budget from SLURM (`squeue`) and exits with
`CONTINUE_EXIT_CODE`. tests/test_slurm.py runs the same through the local SLURM cluster."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
import torch

from debias_workbench.training.job_time import (CONTINUE_EXIT_CODE, STOP_MARGIN_SECONDS, ContinueInNextJob,
                                                JobBudget, job_budget, slurm_seconds)
from debias_workbench.training.runs import train_runs
from debias_workbench.training.trainer import train
from debias_workbench.workflow.slices import run_config

from .test_training import train_config  # noqa: F401 (a fixture)


@pytest.fixture
def three_epochs(train_config):
    """test_training's run (a step schedule), three epochs long."""
    train_config["training"]["epochs"] = 3
    return train_config


def no_room() -> JobBudget:
    """A job whose time is up: it trains its one epoch and stops before the next."""
    return JobBudget(deadline=0.0, clock=lambda: 0.0)


def weights(path) -> dict[str, torch.Tensor]:
    return torch.load(path, weights_only=False)["state_dict"]


def same_weights(a, b) -> bool:
    a, b = weights(a), weights(b)
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_run_over_three_jobs_ends_with_the_uninterrupted_weights(tmp_path, tiny_store, three_epochs, capsys):
    run = run_config(three_epochs, "base_in9", 0)
    straight = train(run, tiny_store, tmp_path / "straight", budget=JobBudget(deadline=1e9, clock=lambda: 0.0))
    for job in range(2):  # each job: one epoch, then the stop
        with pytest.raises(ContinueInNextJob):
            train(run, tiny_store, tmp_path / "jobs", budget=no_room())
        assert f"stopping at epoch {job + 1} of 3 to continue in the next job" in capsys.readouterr().out
        assert (tmp_path / "jobs" / "checkpoint.pt").exists() and not (tmp_path / "jobs" / "model.pt").exists()
    continued = train(run, tiny_store, tmp_path / "jobs", budget=no_room())  # the last epoch: the run ends
    assert "resumed from" in capsys.readouterr().out
    assert (tmp_path / "jobs" / "checkpoint.pt").exists()  # until the scoring job (test_scheduler_survival.py)
    assert same_weights(straight, continued)
    epochs = {json.loads(r)["epoch"] for r in (tmp_path / "jobs" / "train_metrics.jsonl").read_text().splitlines()}
    assert epochs == {0, 1, 2}


def test_a_budget_stops_only_when_the_next_epoch_might_not_fit():
    now = [0.0]
    budget = JobBudget(deadline=1000.0, clock=lambda: now[0])
    assert not budget.must_stop()  # no epoch trained in this job yet: the first always runs
    budget.record(100.0)
    budget.record(40.0)  # the longest epoch counts
    assert budget.longest_epoch == 100.0
    now[0] = 1000.0 - 100.0 - STOP_MARGIN_SECONDS
    assert not budget.must_stop()
    now[0] += 1.0
    assert budget.must_stop()


def test_a_job_of_two_runs_finishes_the_first_from_its_kept_checkpoint(tmp_path, tiny_store, three_epochs):
    three_epochs["training"]["epochs"] = 2
    job = {"runs": [run_config(three_epochs, "base_in9", 0), run_config(three_epochs, "base_in9", 1)]}
    straight = train_runs(job, tiny_store, {}, {}, tmp_path / "straight")
    first, second = (tmp_path / "jobs" / "base_in9" / f"seed{s}" for s in (0, 1))
    stops = 0
    while True:
        try:
            models = train_runs(job, tiny_store, {}, {}, tmp_path / "jobs", budget=no_room())
            break
        except ContinueInNextJob:
            stops += 1
            if (first / "model.pt").exists():  # finished before the second run stopped: its checkpoint stays
                assert (first / "checkpoint.pt").exists()
            for run_dir in (first, second):  # what Snakemake removes of a failed job: its outputs
                for output in ("model.pt", "train_metrics.jsonl"):
                    (run_dir / output).unlink(missing_ok=True)
        assert stops < 5
    assert stops == 3  # run 0's two epochs, then run 1's two: one epoch a job
    assert (first / "checkpoint.pt").exists() and (second / "checkpoint.pt").exists()  # until the scoring job
    assert all(same_weights(a, b) for a, b in zip(straight, models))


def test_slurm_durations():
    assert slurm_seconds("0:45\n") == 45
    assert slurm_seconds("12:03") == 12 * 60 + 3
    assert slurm_seconds("1:02:03") == 3723
    assert slurm_seconds("2-01:00:00") == 2 * 86400 + 3600
    assert slurm_seconds("UNLIMITED") is None and slurm_seconds("NOT_SET") is None and slurm_seconds("") is None


def test_the_budget_is_the_slurm_jobs_time_left():
    asked = []

    def squeue(cmd, **_kwargs):
        asked.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, "1:00:00\n", "")

    budget = job_budget({"SLURM_JOB_ID": "42"}, clock=lambda: 10.0, run=squeue)
    assert budget is not None and budget.deadline == 3610.0
    assert asked == [["squeue", "-h", "-j", "42", "-o", "%L"]]
    assert job_budget({}, run=squeue) is None and len(asked) == 1  # outside SLURM: no budget, no query

    def broken(cmd, **_kwargs):
        raise subprocess.CalledProcessError(1, cmd)

    assert job_budget({"SLURM_JOB_ID": "42"}, run=broken) is None


def test_the_train_command_exits_to_continue_inside_a_short_slurm_job(tmp_path, tiny_store, three_epochs, monkeypatch):
    """A stand-in `squeue` says the job has a minute left: one epoch, the stop, exit 75; the next
    "job" resumes."""
    from debias_workbench.training.cli import train as train_command

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "squeue").write_text("#!/bin/sh\necho 1:00\n")
    (bin_dir / "squeue").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"runs": [run_config(three_epochs, "base_in9", 0)]}))
    args = ["--config", str(job), "--train-store", str(tiny_store), "--runs-dir", str(tmp_path / "runs")]
    assert train_command(args) == CONTINUE_EXIT_CODE
    state = torch.load(tmp_path / "runs" / "base_in9" / "seed0" / "checkpoint.pt", weights_only=False)
    assert state["next_epoch"] == 1
    monkeypatch.delenv("SLURM_JOB_ID")  # outside SLURM: no budget, the run ends
    assert train_command(args) == 0
    assert (tmp_path / "runs" / "base_in9" / "seed0" / "model.pt").exists()
