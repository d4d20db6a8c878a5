"""A local run's warm interpreter (`workflow.job_server`): a job forked from it is the job a process
of its own would have run (same bytes, status, streams), a signal or a kill of its client ends it,
anything but `python -m debias_workbench` generation and training commands and a missing server run as before, and the server ends with
the process that started it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from debias_workbench.workflow import job_server

from .conftest import ROOT


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A server started as the workflow's onstart starts one, with its environment."""
    environ = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    log = tmp_path_factory.mktemp("server") / "job_server.log"
    proc = job_server.start(log, environ)
    assert proc is not None, log.read_text()
    yield environ, proc, log
    job_server.stop(proc, environ)
    assert proc.poll() is not None and environ["WORKBENCH_PYTHON"] == sys.executable
    assert "job server: " in log.read_text() and "cpu seconds by phase:" in log.read_text()


def _train_args(tiny_stores, tmp_path: Path, name: str, default_config: dict, **training) -> list[str]:
    """`-m debias_workbench train` of Base (IN9) on the tiny store, its runs in tmp_path/name."""
    import copy

    from debias_workbench.workflow.config import resolve_config
    from debias_workbench.workflow.slices import run_config

    cfg = resolve_config(copy.deepcopy(default_config))
    run = run_config(cfg, "base_in9", 0)
    run["training"].update(training)
    job = tmp_path / f"{name}.json"
    job.write_text(json.dumps({"runs": [run]}))
    return ["-m", "debias_workbench", "train", "--config", str(job), "--train-store", str(tiny_stores["original"]),
            "--runs-dir", str(tmp_path / name)]


def test_a_served_job_writes_the_bytes_and_the_log_of_a_job_of_its_own(server, tiny_stores, tmp_path, default_config):
    environ, _proc, _log = server
    for name, python in (("served", environ["WORKBENCH_PYTHON"]), ("alone", sys.executable)):
        with open(tmp_path / f"{name}.log", "w") as log:
            proc = subprocess.run([python, *_train_args(tiny_stores, tmp_path, name, default_config, epochs=2)],
                                  env=environ, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
        assert proc.returncode == 0, (tmp_path / f"{name}.log").read_text()
    served, alone = (tmp_path / name / "base_in9" / "seed0" for name in ("served", "alone"))
    assert (served / "model.pt").read_bytes() == (alone / "model.pt").read_bytes()
    logs = [(tmp_path / f"{name}.log").read_text().splitlines() for name in ("served", "alone")]
    assert [line.split("epoch_seconds")[0] for line in logs[0][:2]] == [line.split("epoch_seconds")[0] for line in logs[1][:2]]
    assert logs[0][-1].startswith("cpu seconds by phase:")


def test_a_failing_job_returns_its_status_and_other_commands_run_as_before(server, tmp_path):
    environ, _proc, _log = server
    warm = environ["WORKBENCH_PYTHON"]
    missing = subprocess.run([warm, "-m", "debias_workbench", "train", "--config", str(tmp_path / "none.json"), "--train-store",
                              str(tmp_path), "--runs-dir", str(tmp_path)], env=environ, capture_output=True, text=True)
    assert missing.returncode == 1 and "FileNotFoundError" in missing.stderr and "none.json" in missing.stderr
    usage = subprocess.run([warm, "-m", "debias_workbench", "train", "--nonsense"], env=environ, capture_output=True,
                           text=True)  # a served job's argparse error
    assert usage.returncode == 2 and "workbench train: error: the following arguments are required" in usage.stderr
    plain = subprocess.run([warm, "-c", "import sys; print(sys.executable)"], env=environ, capture_output=True, text=True)
    assert plain.returncode == 0 and plain.stdout.strip() == sys.executable  # ran in the real interpreter
    verify = subprocess.run([warm, "-m", "debias_workbench", "verify", str(tmp_path / "no.zarr")], env=environ,
                            capture_output=True, text=True)  # a served pipeline job: its output and status
    assert verify.returncode == 1 and f"{tmp_path / 'no.zarr'}: BAD" in verify.stdout
    gone = {**environ, job_server.SOCKET_VARIABLE: str(tmp_path / "no.sock")}  # no server there: run alone
    alone = subprocess.run([warm, "-m", "debias_workbench", "nonsense"], env=gone, capture_output=True, text=True)
    assert alone.returncode == 2 and "unknown command 'nonsense'" in alone.stderr


def _served_children(proc: subprocess.Popen) -> list[psutil.Process]:
    return psutil.Process(proc.pid).children()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_signal_or_a_kill_of_the_client_ends_its_job(server, tiny_stores, tmp_path, default_config, sig):
    """SIGTERM (Snakemake ending a job) reaches the job, which dies of it; SIGKILL (the whole workflow
    killed) closes the client's socket, and the server kills the job."""
    environ, proc, _log = server
    args = _train_args(tiny_stores, tmp_path, "long", default_config, epochs=100_000)
    client = subprocess.Popen([environ["WORKBENCH_PYTHON"], *args], env=environ, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, cwd=ROOT)
    deadline = time.monotonic() + 60
    while not (tmp_path / "long" / "base_in9" / "seed0" / "checkpoint.pt").exists():
        assert time.monotonic() < deadline and client.poll() is None, "the served job never trained"
        time.sleep(0.1)
    (job,) = _served_children(proc)
    client.send_signal(sig)
    assert client.wait(timeout=30) == (128 + signal.SIGTERM if sig == signal.SIGTERM else -signal.SIGKILL)
    job.wait(timeout=30)  # gone, and reaped by the server
    assert _served_children(proc) == []


def test_the_server_ends_with_the_process_that_started_it(tmp_path):
    """A server whose Snakemake is gone (killed) does not outlive it."""
    code = ("import os, sys, time; from pathlib import Path; from debias_workbench.workflow import job_server; "
            f"proc = job_server.start(Path({str(tmp_path / 'server.log')!r})); print(proc.pid, flush=True); "
            "time.sleep(600)")
    owner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=ROOT,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    server_pid = int(owner.stdout.readline())
    owner.kill()
    owner.wait()
    psutil.Process(server_pid).wait(timeout=30)
    assert "job server: 0 jobs" in (tmp_path / "server.log").read_text()


def test_only_a_local_run_in_snakemakes_own_interpreter_with_jobs_to_serve_starts_one():
    jobs = ["in9_variant", "train", "evaluate_park_cmnist", "report", "all"]
    assert job_server.wanted(local=True, own_environments=False, touch=False, rules=jobs, environ={})
    assert not job_server.wanted(local=False, own_environments=False, touch=False, rules=jobs, environ={})  # a cluster's jobs
    assert not job_server.wanted(local=True, own_environments=True, touch=False, rules=jobs, environ={})  # --use-conda
    assert not job_server.wanted(local=True, own_environments=False, touch=False, rules=jobs,
                                 environ={job_server.SWITCH_VARIABLE: "0"})
    assert not job_server.wanted(local=True, own_environments=False, touch=True, rules=jobs, environ={})
    # one job to serve: the server would import what the job imports
    assert not job_server.wanted(local=True, own_environments=False, touch=False, rules=["train", "report", "all"], environ={})


def _long_job(server, tiny_stores, tmp_path, default_config, name: str, environ: dict | None = None):
    """A served training job that runs until stopped, once it has written its first checkpoint."""
    env, _proc, _log = server
    args = _train_args(tiny_stores, tmp_path, name, default_config, epochs=100_000)
    client = subprocess.Popen([env["WORKBENCH_PYTHON"], *args], env=environ or env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True, cwd=ROOT)
    deadline = time.monotonic() + 60
    while not (tmp_path / name / "base_in9" / "seed0" / "checkpoint.pt").exists():
        assert time.monotonic() < deadline and client.poll() is None, "the job never trained"
        time.sleep(0.1)
    return client


def test_a_job_that_fails_at_its_start_leaves_the_others_running(server, tiny_stores, tmp_path, default_config):
    """A request whose directory is gone fails in its own child (status 1, its traceback on its stderr);
    the job already running goes on and is stopped as any other."""
    environ, proc, _log = server
    running = _long_job(server, tiny_stores, tmp_path, default_config, "running")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sock.connect(environ[job_server.SOCKET_VARIABLE])
    err = tmp_path / "err.txt"
    with open(err, "w") as stderr:
        job_server._send(sock, {"argv": [sys.executable, "-m", "debias_workbench", "train"], "cwd": str(tmp_path / "gone"),
                                "env": dict(environ)}, [0, 1, stderr.fileno()])
    started, _ = job_server._receive(sock)
    ended, _ = job_server._receive(sock)
    assert "pid" in started and ended == {"status": 1} and "FileNotFoundError" in err.read_text()
    assert running.poll() is None and len(_served_children(proc)) == 1
    running.send_signal(signal.SIGINT)  # Ctrl-C: the job's KeyboardInterrupt, with its traceback
    assert running.wait(timeout=30) == 128 + signal.SIGINT and "KeyboardInterrupt" in running.stderr.read()


def test_a_job_is_killed_when_its_server_dies(tiny_stores, tmp_path, default_config):
    environ = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = job_server.start(tmp_path / "server.log", environ)
    client = _long_job((environ, proc, None), tiny_stores, tmp_path, default_config, "orphan")
    (job,) = _served_children(proc)
    proc.kill()
    assert client.wait(timeout=30) == 1 and "the job was killed" in client.stderr.read()
    job.wait(timeout=30)  # gone: it does not train on, unwatched


def test_a_job_with_other_interpreter_settings_runs_in_its_own_process(server, tiny_stores, tmp_path,
                                                                        default_config):
    """PYTHONHASHSEED and the like are read when an interpreter starts: a job that sets them other than the
    server's is declined, and its client runs it itself."""
    environ, proc, _log = server
    client = _long_job(server, tiny_stores, tmp_path, default_config, "own", {**environ, "PYTHONHASHSEED": "7"})
    assert _served_children(proc) == []
    client.kill()
    client.wait()
