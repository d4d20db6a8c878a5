"""Runs that survive what a SLURM cluster does to their jobs (issue 61), on the local one-node cluster
(`devtools/local_slurm.py`), through `--executor slurm` with the documented profiles as in test_slurm.py:
a job ended by SLURM's own time limit (state TIMEOUT), a job requeued (`scontrol requeue`, as a
preemption does) and a job killed after its `model.pt` was written each end their run from its
checkpoint, with the weights of the same run trained in one local job.

The runs are short (a few seconds); to make one outlast its job without spending the CPU, the test
stops its trainer (SIGSTOP) at a known point: SLURM sends every job it ends SIGCONT with its SIGTERM
(slurmd's `_rpc_terminate_job`), so the trainer then meets the end as a slow one would. Skips, saying
why, where SLURM cannot be installed or started (test_slurm.py's `running_cluster`)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest
import torch

from debias_workbench.training.run_files import PROGRESS, RUN_LOG
from devtools import local_slurm

from .conftest import workdir
from .test_slurm import running_cluster, scontrol_jobs
from .test_workflow import snakemake

#: epochs of each probe run: a few seconds of training, so that the test can stop its trainer mid-run
EPOCHS = 40
PROBES = ("timeout_probe", "requeue_probe", "accepted_probe")
#: a requeued job waits `cred_expire` + 1 s before it starts again (SLURM's default: 121 s)
CRED_EXPIRE_S = 10
#: how long a test waits for its workflow (the time limit alone takes 60 to 90 s: SLURM's least limit is a
#: minute, checked every 30 s)
WORKFLOW_TIMEOUT_S = 480
#: how the trainer's log says it stopped for the next job, and that an attempt ended so
STOPPED_BY_SIGTERM = "(SIGTERM: the scheduler ends the job soon)"
STOPPED = "== attempt ended: stopped to continue in the next job (exit 75)"
T = TypeVar("T")


@pytest.fixture(scope="module")
def cluster():
    yield from running_cluster(cred_expire=CRED_EXPIRE_S)


@pytest.fixture(scope="module")
def straight(tmp_path_factory) -> tuple[list[str], Path, dict[str, dict]]:
    """(config files, results folder, {probe: weights}): the store and each probe run trained in one
    local job; the runs' folders then removed for the SLURM runs to train them again."""
    root = tmp_path_factory.mktemp("survival")
    results = root / "results"
    probes = {name: {"method": "erm", "dataset": "in9", "train_variant": "original", "label": f"SLURM {name}",
                     "training": {"epochs": EPOCHS}} for name in PROBES}
    (root / "probes.yaml").write_text(json.dumps({"results": str(results), "experiments": probes}))
    configs = ["tests/data/tiny.yaml", str(root / "probes.yaml")]
    snakemake(*[str(model(results, name)) for name in PROBES], "--cores", "2", "--configfile", *configs)
    weights = {name: torch.load(model(results, name), weights_only=False)["state_dict"] for name in PROBES}
    for name in PROBES:
        shutil.rmtree(model(results, name).parent)
    return configs, results, weights


def model(results: Path, probe: str) -> Path:
    return results / "runs" / probe / "seed0" / "model.pt"


def run_workflow(cluster, configs: list[str], target: Path, log: Path, retries: int,
                 during: Callable[[subprocess.Popen], T], *options: str) -> tuple[int, T]:
    """(Snakemake's exit code, what `during` returned) for `target` through the cluster (the SLURM command of
    docs/cluster.md), `during` (given the Snakemake process) done to its jobs while it runs."""
    cmd = [sys.executable, "-m", "snakemake", str(target), "--executor", "slurm", "--workflow-profile",
           "profiles/slurm", "--profile", "profiles/slurm-local", "--retries", str(retries), *options,
           "--configfile", *configs]
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, cwd=workdir(), env=cluster.env, stdout=out, stderr=subprocess.STDOUT)
        try:
            done = during(proc)
            return proc.wait(timeout=WORKFLOW_TIMEOUT_S), done
        finally:
            if proc.poll() is None:
                proc.kill()


def wait_for(ready: Callable[[], T], proc: subprocess.Popen, what: str, timeout: float = 300) -> T:
    """`ready()`'s first true value, asked every 20 ms while the workflow runs."""
    end = time.monotonic() + timeout
    while not (value := ready()):
        assert proc.poll() is None, f"the workflow ended before {what}"
        assert time.monotonic() < end, f"no {what} in {timeout:.0f} s"
        time.sleep(0.02)
    return value


def command_line(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def trainer(results: Path) -> int | None:
    """PID of the running `train` command that writes under `results` (the job's Python, not its shell)."""
    for entry in Path("/proc").glob("[0-9]*"):
        args = command_line(int(entry.name))
        if args[1:4] == ["-m", "debias_workbench", "train"] and str(results / "runs") in args:
            if local_slurm.is_running(int(entry.name)):
                return int(entry.name)
    return None


def snakemake_above(pid: int) -> int:
    """The nearest process above `pid` that is a Snakemake: the job step's, which runs the job's shell."""
    while pid > 1:
        pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        if any(Path(arg).name == "snakemake" for arg in command_line(pid)[:3]):
            return pid
    raise AssertionError("the train command runs under no Snakemake")


@dataclass(frozen=True)
class Stopped:
    """A probe's trainer stopped in its job (`job`) with `steps` of its run done, `epoch_steps` an epoch."""

    job: str
    steps: int
    epoch_steps: int


def stop_after_first_checkpoint(cluster, results: Path, probe: str, proc: subprocess.Popen) -> Stopped:
    """Stop (SIGSTOP) the probe's trainer once its first epoch checkpoint is written, still short of its end."""
    run_dir = model(results, probe).parent
    pid = wait_for(lambda: trainer(results), proc, "train command")
    wait_for((run_dir / PROGRESS).exists, proc, "first checkpoint")
    os.kill(pid, signal.SIGSTOP)
    progress = json.loads((run_dir / PROGRESS).read_text())
    assert progress["steps_done"] < progress["all_steps"], "the probe ended before the test could stop it"
    return Stopped(running_job(cluster, probe), progress["steps_done"], progress["all_steps"] // EPOCHS)


def running_job(cluster, probe: str) -> str:
    return next(j["JobId"] for j in scontrol_jobs(cluster) if probe in j.get("Comment", "")
                and j["JobState"] == "RUNNING")


def jobs_of(cluster, probe: str) -> list[dict[str, str]]:
    """The probe's jobs, in submission order."""
    return sorted((j for j in scontrol_jobs(cluster) if probe in j.get("Comment", "")), key=lambda j: int(j["JobId"]))


def attempts(results: Path, probe: str) -> list[str]:
    """The attempts the run's own log holds (train.log, appended by each), each from its header line."""
    text = (model(results, probe).parent / RUN_LOG).read_text()
    return [chunk for chunk in re.split(r"^(?=== attempt started )", text, flags=re.M) if chunk]


def resumed_step(attempt: str, epoch_steps: int) -> int:
    """The run's step at which `attempt` resumed (`resumed from ... at epoch E[, step S]`)."""
    found = re.search(r"resumed from \S+ at epoch (\d+)(?:, step (\d+))?", attempt)
    assert found, attempt[-2000:]
    return int(found[1]) * epoch_steps + int(found[2] or 0)


def same_weights(results: Path, probe: str, weights: dict[str, dict]) -> bool:
    mine = torch.load(model(results, probe), weights_only=False)["state_dict"]
    return mine.keys() == weights[probe].keys() and all(torch.equal(mine[k], weights[probe][k]) for k in mine)


def test_a_job_killed_after_model_pt_does_not_train_the_run_again(cluster, straight, tmp_path):
    """The job's trainer writes model.pt and exits, but the job never ends well: its job step's Snakemake is
    held (stopped, as one waiting for the files of a slow shared file system) and the job then cancelled.
    Snakemake removes the failed job's outputs and retries it; the checkpoint stays past model.pt, so the
    retry trains no epoch again and writes the uninterrupted run's model."""
    configs, results, weights = straight
    run_dir = model(results, "accepted_probe").parent

    def kill_after_model_pt(proc: subprocess.Popen) -> None:
        pid = wait_for(lambda: trainer(results), proc, "train command")
        os.kill(snakemake_above(pid), signal.SIGSTOP)  # the step's Snakemake cannot accept the outputs
        wait_for(lambda: not local_slurm.is_running(pid), proc, "end of the trainer")
        assert (run_dir / "model.pt").exists()
        subprocess.run(["scancel", running_job(cluster, "accepted_probe")], env=cluster.env, check=True)

    log = tmp_path / "slurm.log"
    rc, _ = run_workflow(cluster, configs, model(results, "accepted_probe"), log, 1, kill_after_model_pt)
    assert rc == 0, log.read_text()[-4000:]
    assert [j["JobState"] for j in jobs_of(cluster, "accepted_probe")] == ["CANCELLED", "COMPLETED"]
    first, second = attempts(results, "accepted_probe")
    assert first.rstrip().endswith("== attempt ended: done"), first[-2000:]
    assert re.search(rf"resumed from \S+ at epoch {EPOCHS}\n", second), second[-2000:]
    assert "epoch_seconds=" not in second  # no epoch trained again
    assert same_weights(results, "accepted_probe", weights)


def test_a_requeued_job_continues_from_its_checkpoint(cluster, straight, tmp_path):
    """`scontrol requeue` (what a preemption with PreemptMode=REQUEUE does) ends the running job with SIGTERM
    and starts it again as the same job: the trainer checkpoints at its next step, the restarted job
    resumes there and finishes, with no retry of Snakemake's (`--retries 0`)."""
    configs, results, weights = straight

    def requeue(proc: subprocess.Popen) -> Stopped:
        stop = stop_after_first_checkpoint(cluster, results, "requeue_probe", proc)
        subprocess.run(["scontrol", "requeue", stop.job], env=cluster.env, check=True)
        return stop

    log = tmp_path / "slurm.log"
    rc, stop = run_workflow(cluster, configs, model(results, "requeue_probe"), log, 0, requeue)
    assert rc == 0, log.read_text()[-4000:]
    jobs = jobs_of(cluster, "requeue_probe")
    assert [(j["JobId"], j["JobState"], j["Restarts"]) for j in jobs] == [(stop.job, "COMPLETED", "1")]
    first, second = attempts(results, "requeue_probe")
    assert f"SLURM job {stop.job}, " in first and f"SLURM job {stop.job}, " in second
    assert STOPPED_BY_SIGTERM in first and first.rstrip().endswith(STOPPED), first[-2000:]
    assert resumed_step(second, stop.epoch_steps) >= stop.steps
    assert same_weights(results, "requeue_probe", weights)


def test_a_job_at_its_time_limit_continues_in_the_next_job(cluster, straight, tmp_path):
    """SLURM ends the job at its time limit (TIMEOUT), with no warning signal before it (a site profile that
    sets its own `slurm_extra`): the trainer takes the limit's SIGTERM, checkpoints at its next step and
    exits; Snakemake's retry resumes past the last epoch checkpoint and ends with the uninterrupted weights.
    The job's limit is cut to SLURM's least (1 min) once its trainer is stopped after the first epoch."""
    configs, results, weights = straight

    def at_the_limit(proc: subprocess.Popen) -> Stopped:
        stop = stop_after_first_checkpoint(cluster, results, "timeout_probe", proc)
        subprocess.run(["scontrol", "update", f"JobId={stop.job}", "TimeLimit=1"], env=cluster.env, check=True)
        return stop

    log = tmp_path / "slurm.log"
    rc, stop = run_workflow(cluster, configs, model(results, "timeout_probe"), log, 1, at_the_limit,
                      "--set-resources", "train:slurm_extra='--nice=0'")
    assert rc == 0, log.read_text()[-4000:]
    jobs = jobs_of(cluster, "timeout_probe")
    assert [(j["JobId"], j["JobState"]) for j in jobs] == [(stop.job, "TIMEOUT"), (jobs[-1]["JobId"], "COMPLETED")]
    assert "SLURM status is: 'TIMEOUT'" in log.read_text()
    first, second = attempts(results, "timeout_probe")
    assert STOPPED_BY_SIGTERM in first and first.rstrip().endswith(STOPPED), first[-2000:]
    assert resumed_step(second, stop.epoch_steps) >= stop.steps  # where SIGTERM stopped it: no step trained again
    assert same_weights(results, "timeout_probe", weights)
