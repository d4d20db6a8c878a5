"""Runs that survive the scheduler (issue 61), without a scheduler: a job that fails after `model.pt`
is written ends the run from its kept checkpoint instead of retraining it from zero, and the scoring
job removes the checkpoint once the workflow has accepted the model; the run's own log keeps every
attempt; a retried or continued job asks for the work its checkpoint leaves; the job reads its end
from `SLURM_JOB_END_TIME` before asking `squeue`, and a failed query is a warning with its cost."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml

from debias_workbench.training.job_time import ContinueInNextJob, JobBudget, job_budget
from debias_workbench.training.run_files import CHECKPOINT, PROGRESS, RUN_LOG, fraction_done
from debias_workbench.training.trainer import train
from debias_workbench.workflow import resources
from debias_workbench.workflow.cost import run_estimate
from debias_workbench.workflow.slices import run_config

from .conftest import ROOT
from .test_continuation import no_room, same_weights, three_epochs  # noqa: F401 (a fixture)
from .test_training import train_config  # noqa: F401 (a fixture)


def snakemake_failure(run_dir) -> None:
    """What Snakemake removes of a failed training job: its declared outputs."""
    for output in ("model.pt", "train_metrics.jsonl"):
        (run_dir / output).unlink(missing_ok=True)


def test_a_failure_after_model_pt_ends_the_run_from_its_checkpoint(tmp_path, tiny_store, three_epochs, capsys):
    """The job fails after the trainer wrote model.pt (Snakemake's wait for the files, a node lost):
    the retry trains no epoch again, and ends with the same model and metrics."""
    run = run_config(three_epochs, "base_in9", 0)
    first = train(run, tiny_store, tmp_path / "run")
    weights_before = (tmp_path / "run" / "model.pt").read_bytes()
    metrics = (tmp_path / "run" / "train_metrics.jsonl").read_text()
    assert (tmp_path / "run" / CHECKPOINT).exists()  # kept past model.pt: the job is not accepted yet
    snakemake_failure(tmp_path / "run")
    capsys.readouterr()
    again = train(run, tiny_store, tmp_path / "run")
    out = capsys.readouterr().out
    assert "resumed from" in out and "at epoch 3" in out
    assert "base_in9 seed 0 epoch" not in out  # no epoch trained again
    assert same_weights(first, again) and weights_before
    assert (tmp_path / "run" / "train_metrics.jsonl").read_text() == metrics


def test_the_scoring_job_removes_the_accepted_runs_checkpoint(tmp_path, tiny_store, train_config):
    """The evaluate job runs only once the workflow has accepted model.pt: it removes the checkpoint
    and its progress, so a forced rerun trains the run again."""
    from debias_workbench.training.cli import evaluate

    train_config["training"]["epochs"] = 1
    model = train(run_config(train_config, "base_in9", 0), tiny_store, tmp_path / "run")
    assert (tmp_path / "run" / CHECKPOINT).exists() and (tmp_path / "run" / PROGRESS).exists()
    config = tmp_path / "eval.json"
    config.write_text(json.dumps({"dataset": "in9", "split": "val", "batch_size": 16}))
    assert evaluate(["--config", str(config), "--models", str(model), "--stores", f"original={tiny_store}",
                     "--out", str(tmp_path / "eval.jsonl")]) == 0
    assert not (tmp_path / "run" / CHECKPOINT).exists() and not (tmp_path / "run" / PROGRESS).exists()
    assert model.exists()


def test_the_runs_log_keeps_every_attempt(tmp_path, tiny_store, three_epochs):
    """Snakemake removes a job's log before each attempt; the run's own train.log appends: a header
    line per attempt, its lines, and how it ended."""
    run = run_config(three_epochs, "base_in9", 0)
    run_dir = tmp_path / "run"
    with pytest.raises(ContinueInNextJob):
        train(run, tiny_store, run_dir, budget=no_room())
    with pytest.raises(ContinueInNextJob):
        train(run, tiny_store, run_dir, budget=no_room())
    train(run, tiny_store, run_dir, budget=no_room())
    lines = (run_dir / RUN_LOG).read_text().splitlines()
    headers = [i for i, line in enumerate(lines) if line.startswith("== attempt started ")]
    ends = [line for line in lines if line.startswith("== attempt ended: ")]
    assert len(headers) == 3 and headers[0] == 0
    assert ends == ["== attempt ended: stopped to continue in the next job (exit 75)"] * 2 + ["== attempt ended: done"]
    assert [line for line in lines if line.startswith("base_in9 seed 0 epoch ")] == [
        line for line in lines if " epoch " in line and "epoch_seconds=" in line]
    assert sum("epoch_seconds=" in line for line in lines) == 3  # each epoch once, over three attempts
    assert sum("stopping at epoch" in line for line in lines) == 2
    assert sum("resumed from" in line for line in lines) == 2


def test_a_retried_job_asks_for_the_work_its_checkpoint_leaves(tmp_path, tiny_store, three_epochs):
    """The runtime request of a job follows its runs' checkpoints: after one epoch of three, two
    thirds of the steps are left (the extra work counted whole); a checkpoint of another config is
    none (the trainer starts that run over)."""
    run = run_config(three_epochs, "base_in9", 0)
    runs_dir = tmp_path / "runs"
    run_dir = runs_dir / "base_in9" / "seed0"
    full = resources.training([run])[0]
    assert resources.training_left([run], 1, 1, runs_dir) == full  # nothing done yet
    with pytest.raises(ContinueInNextJob):  # the trainer reads the job's JSON, as the workflow writes it
        train(json.loads(json.dumps(run)), tiny_store, run_dir, budget=no_room())
    assert json.loads((run_dir / PROGRESS).read_text())["steps_done"] > 0
    estimate = run_estimate(run)
    left = resources.training_left([run], 1, 1, runs_dir)
    assert left < full
    assert left == pytest.approx(estimate.seconds_left(1 / 3) / 60)
    assert left >= estimate.extra_seconds / 60
    rule = resources.rule_resources(three_epochs, True, lambda wc: resources.training([run]), None,
                                    lambda wc: resources.training_left([run], 1, 1, runs_dir))
    assert rule["runtime"](None, 2) == resources.request_minutes(left, three_epochs["cluster"]["max_job_hours"], 2)
    other = json.loads(json.dumps(run))
    other["training"]["epochs"] = 4  # another config: its run starts over
    assert fraction_done(run_dir, "another config's hash") == 0.0
    assert resources.training_left([other], 1, 1, runs_dir) == resources.training([other])[0]


def test_the_job_end_comes_from_slurm_job_end_time_before_squeue():
    def squeue(cmd, **_kwargs):
        raise AssertionError("squeue asked though SLURM_JOB_END_TIME is set")

    budget = job_budget({"SLURM_JOB_ID": "42", "SLURM_JOB_END_TIME": "1700003600"}, clock=lambda: 10.0, run=squeue,
                        wall=lambda: 1700000000.0)
    assert budget is not None and budget.deadline == 3610.0


@pytest.mark.parametrize("answer", ["raise", "INVALID\n", ""])
def test_a_failed_squeue_query_is_a_warning_saying_what_it_costs(answer, capsys):
    def squeue(cmd, **_kwargs):
        if answer == "raise":
            raise subprocess.CalledProcessError(1, cmd)
        return subprocess.CompletedProcess(cmd, 0, answer, "")

    assert job_budget({"SLURM_JOB_ID": "42"}, run=squeue) is None
    err = capsys.readouterr().err
    assert err.startswith("warning: cannot learn SLURM job 42's time left")
    assert "training without a time budget" in err and "the epoch under way is lost" in err


def test_a_job_without_a_time_limit_has_no_budget_and_no_warning(capsys):
    def squeue(cmd, **_kwargs):
        return subprocess.CompletedProcess(cmd, 0, "UNLIMITED\n", "")

    assert job_budget({"SLURM_JOB_ID": "42"}, run=squeue) is None
    assert capsys.readouterr().err == ""


def test_a_budget_from_the_end_time_stops_the_run_in_time():
    """The budget the end time gives behaves as squeue's: the first epoch always, then only while one fits."""
    now = [0.0]
    budget = job_budget({"SLURM_JOB_ID": "1", "SLURM_JOB_END_TIME": "2000"}, clock=lambda: now[0], wall=lambda: 1000.0)
    assert isinstance(budget, JobBudget) and budget.left() == 1000.0 and not budget.must_stop()
    budget.record(800.0)
    assert budget.must_stop()


def _stop_at_step(monkeypatch, method: str, step: int) -> None:
    """A stop signal noted (as `job_time._note_signal` notes SIGUSR1) during optimiser step `step` (1-based)
    of the process, as SLURM's warning would arrive."""
    from debias_workbench.training import job_time
    from debias_workbench.training.methods import get_method

    cls, calls = get_method(method), [0]
    original = cls.update

    def update(self, batch):
        calls[0] += 1
        if calls[0] == step:
            job_time._RECEIVED.append("SIGUSR1")
        return original(self, batch)

    monkeypatch.setattr(cls, "update", update)


@pytest.mark.parametrize("experiment", ["base_in9", "moco"])
def test_a_stop_signal_mid_epoch_checkpoints_at_the_step_and_resumes_bit_identically(
        experiment, tmp_path, tiny_store, three_epochs, monkeypatch):
    """SLURM's warning arrives during epoch 1 (step 2 of its 3): the trainer checkpoints after that
    step, stops to continue; the next job skips the epoch's first two batches, restores the
    augmentation generator, the epoch's sums and the monitor's rows, and ends with the weights and
    metric rows of an uninterrupted run (ERM; MoCo-v2: queue, shuffled BN, views, then its probe)."""
    from debias_workbench.training import job_time
    from debias_workbench.training.trainer import Monitor

    monkeypatch.setattr(job_time, "_RECEIVED", [])
    if experiment == "moco":  # the fixture's batch of 6 in shuffled-BN splits of 2
        three_epochs["experiments"]["moco"].setdefault("method_args", {})["bn_splits"] = 2
    run = run_config(three_epochs, experiment, 0)
    monitor = lambda: Monitor({"original": tiny_store}, every_steps=2)  # noqa: E731  (points inside epochs)
    straight = train(run, tiny_store, tmp_path / "straight", monitor=monitor())
    with monkeypatch.context() as patch:
        _stop_at_step(patch, run["method"], 3 + 2)  # epoch 0's three steps, then two of epoch 1
        with pytest.raises(ContinueInNextJob, match=r"stopping at step 2 of epoch 1 of \d+ "):
            train(run, tiny_store, tmp_path / "stopped", monitor=monitor())
    saved = json.loads((tmp_path / "stopped" / PROGRESS).read_text())
    assert saved["steps_done"] == 3 + 2 and saved["all_steps"] == 3 * run["training"]["epochs"]
    monkeypatch.setattr(job_time, "_RECEIVED", [])  # the next job: no signal yet
    resumed = train(run, tiny_store, tmp_path / "stopped", monitor=monitor())
    assert "resumed from" in (tmp_path / "stopped" / RUN_LOG).read_text()
    assert same_weights(straight, resumed)
    timing = ("epoch_seconds", "images_per_second")
    rows = lambda d: [r for r in map(json.loads, (d / "train_metrics.jsonl").read_text().splitlines())  # noqa: E731
                      if r["metric"] not in timing]
    assert rows(tmp_path / "straight") == rows(tmp_path / "stopped")
    assert any(r["kind"] == "curve" and r["epoch"] == 1 for r in rows(tmp_path / "stopped"))


@pytest.mark.parametrize("sig", ["SIGUSR1", "SIGTERM"])
def test_the_train_command_in_a_slurm_job_takes_the_warning_signal_and_exits_to_continue(
        sig, tmp_path, tiny_store, three_epochs, monkeypatch):
    """A real signal to the `train` command inside a SLURM job (no time limit: no budget) after its
    first checkpoint: it stops at its next step with a checkpoint and exits 75; outside SLURM the
    signals keep their meaning (not installed)."""
    import os
    import signal
    import sys
    import time

    from debias_workbench.training.job_time import CONTINUE_EXIT_CODE

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "squeue").write_text("#!/bin/sh\necho UNLIMITED\n")
    (bin_dir / "squeue").chmod(0o755)
    three_epochs["training"]["epochs"] = 100_000
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"runs": [run_config(three_epochs, "base_in9", 0)]}))
    run_dir = tmp_path / "runs" / "base_in9" / "seed0"
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "SLURM_JOB_ID": "7",
           "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "debias_workbench", "train", "--config", str(job), "--train-store",
                             str(tiny_store), "--runs-dir", str(tmp_path / "runs")], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    while not (run_dir / PROGRESS).exists():
        assert time.monotonic() < deadline and proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        time.sleep(0.1)
    proc.send_signal(getattr(signal, sig))
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == CONTINUE_EXIT_CODE, out[-3000:]
    assert f"received {sig}" in out and "to continue in the next job" in out
    assert f"({sig}: the scheduler ends the job soon)" in out
    assert (run_dir / CHECKPOINT).exists() and not (run_dir / "model.pt").exists()
    assert "== attempt ended: stopped to continue in the next job (exit 75)" in (run_dir / RUN_LOG).read_text()


def test_a_cluster_jobs_own_snakemake_ignores_the_warning_signal():
    """The job step's Snakemake would die of USR1 (ending the step before the trainer checkpoints);
    the Snakemake that submits keeps it."""
    import signal

    before = signal.getsignal(signal.SIGUSR1)
    try:
        resources.ignore_warning_signal(main_process=True)
        assert signal.getsignal(signal.SIGUSR1) == before
        resources.ignore_warning_signal(main_process=False)
        assert signal.getsignal(signal.SIGUSR1) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGUSR1, before)
    extra = resources.slurm_warning(lambda wildcards, attempt: 60 * attempt)["slurm_extra"]
    assert (extra(None, 1), extra(None, 2)) == ("--signal=USR1@180", "--signal=USR1@180")
    # a job shorter than 12 minutes is warned a quarter of its request before its end, never at its start
    assert resources.slurm_warning(lambda wildcards, attempt: 3)["slurm_extra"](None, 1) == "--signal=USR1@45"


@pytest.mark.parametrize("cause", ["budget", "signal"])
def test_the_linear_probe_runs_inside_the_budget(cause, tmp_path, tiny_store, three_epochs, monkeypatch, capsys):
    """A job that trained the run's last epoch and has no room for the probe (2 augmented passes), or got
    the scheduler's warning, stops before it; the next job resumes at the run's end, fits only the probe
    (a job that trained no epoch always does) and ends with the uninterrupted run's model."""
    from debias_workbench.training import job_time

    monkeypatch.setattr(job_time, "_RECEIVED", [])
    moco = three_epochs["experiments"]["moco"]
    moco.setdefault("training", {})["epochs"] = 1
    moco.setdefault("method_args", {}).update(bn_splits=2, probe_augment=True, probe_epochs=2)
    run = run_config(three_epochs, "moco", 0)
    straight = train(run, tiny_store, tmp_path / "straight")
    budget = no_room() if cause == "budget" else None
    capsys.readouterr()
    with monkeypatch.context() as patch:
        if cause == "signal":
            _stop_at_step(patch, run["method"], 3)  # during the epoch's last step: the epoch ends, then the stop
        with pytest.raises(ContinueInNextJob, match=r"stopping before the linear probe's 2 pass\(es\)"):
            train(run, tiny_store, tmp_path / "jobs", budget=budget)
    assert "moco seed 0 epoch 0:" in capsys.readouterr().out  # the epoch trained, then the stop
    assert not (tmp_path / "jobs" / "model.pt").exists()
    monkeypatch.setattr(job_time, "_RECEIVED", [])
    finished = train(run, tiny_store, tmp_path / "jobs", budget=no_room())  # no epoch left: the probe always runs
    assert "moco seed 0 epoch" not in capsys.readouterr().out
    assert same_weights(straight, finished)


def test_snakemake_inside_an_allocation_says_at_its_start_what_a_stop_means():
    """`snakemake --cores N` inside `sbatch` / `salloc`: its jobs budget against the allocation and a stop
    fails the job there; the note says so and what to do. A submitting Snakemake, or one outside SLURM, says nothing."""
    note = resources.allocation_note(True, {"SLURM_JOB_ID": "99"})
    assert note is not None and "inside SLURM job 99" in note
    assert "exits 75, which fails its job here" in note and "Run the workflow again in a new allocation" in note
    assert "--executor slurm" in note
    assert resources.allocation_note(False, {"SLURM_JOB_ID": "99"}) is None
    assert resources.allocation_note(True, {}) is None


def test_a_submitting_snakemake_names_the_login_nodes_gpu_cap_and_the_slurm_profile_gives_its_own():
    """While Snakemake reads the Snakefile it has not chosen its executor, so a submitting run on a node with GPUs
    and no `gpu` limit of its own gets the node's count (a local run's cap); its start says so and how to change it.
    The workflow profile gives a limit of its own, so the Snakefile applies none there."""
    note = resources.cluster_gpu_cap_note(False, 2)
    assert note is not None and "at most 2 GPU jobs will be in flight" in note
    assert "--resources gpu=N" in note and "--workflow-profile profiles/slurm" in note
    assert resources.cluster_gpu_cap_note(True, 2) is None  # a local run: the cap is what it is for
    assert resources.cluster_gpu_cap_note(False, None) is None  # the node had no GPUs, or a limit was given
    profile = yaml.safe_load((ROOT / "profiles" / "slurm" / "config.yaml").read_text())
    limits = dict(item.split("=") for item in profile["resources"])
    assert int(limits["gpu"]) >= profile["jobs"]  # no tighter than the jobs in flight: a site lowers it
