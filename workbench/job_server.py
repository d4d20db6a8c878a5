"""A warm interpreter for the jobs of a local run: torch imported once, every job forked from it.

A generation, training, scoring or analysis job is a process of its own (`python -m pipeline ...`,
`python -m training ...`), and on a CPU it spends seconds importing torch, torchvision and the
package before its first step: a third of a small demo job, two thirds of a smoke-mode one. For a
local run (`snakemake --cores N`) the Snakefile's `onstart` starts a server (`serve`) that imports
them once and listens on a Unix socket; the rules' interpreter (`WORKBENCH_PYTHON`) becomes
`warm_python` beside this module, whose client (`client`) hands the job's arguments, working
directory, environment and standard streams to the server, which forks a child to run the module
as `python -m` would. The job is the same code with the same arguments and seeds: only the import
is shared.

A job stays a job: the client waits for the child's exit status and returns it; a signal to the
client (Snakemake's SIGTERM) goes to the child's process group; when the client dies (SIGKILL of
the whole workflow) the server kills the child; when Snakemake itself is gone the server ends.
Anything else the client runs (`-m report`, `-m torch.distributed.run`, ...) it runs as before,
and so it does when no server answers. Cluster runs (`--executor slurm`) never start one.
"""

from __future__ import annotations

import importlib
import json
import os
import runpy
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from core.phases import summary

#: what the server imports once for every job it forks (torchvision: the ResNets; it also
#: imports torch._dynamo, which torch's optimisers import on first use); not the `__main__`
#: modules: runpy runs those anew for each job
PRELOAD = ("torch", "torchvision", "training.models", "training.runs", "training.trainer", "training.evaluation",
           "training.analysis", "pipeline.fingerprint", "pipeline.segment_stage", "pipeline.variant_stage",
           "pipeline.derived_stage", "pipeline.datasets.in9")
#: the modules whose jobs (`python -m <module> ...`) the client hands to the server
SERVED = ("training", "pipeline")
#: environment of the client: the server's socket, and the interpreter to run anything else with
SOCKET_VARIABLE, PYTHON_VARIABLE = "WORKBENCH_JOB_SERVER", "WORKBENCH_REAL_PYTHON"
#: the interpreter the rules run when a server is up (a shell script calling `client`)
WARM_PYTHON = Path(__file__).with_name("warm_python")
#: the largest request (arguments, working directory, environment) a client sends
MAX_REQUEST = 1 << 20
#: how long `start` waits for the server's imports before going on without it
START_TIMEOUT_S = 120.0


def _send(sock: socket.socket, message: dict[str, Any], fds: list[int] = ()) -> None:
    socket.send_fds(sock, [json.dumps(message).encode()], list(fds))


def _receive(sock: socket.socket) -> tuple[dict[str, Any] | None, list[int]]:
    """One message and the descriptors sent with it; (None, []) when the other end is gone."""
    try:
        data, fds, _flags, _addr = socket.recv_fds(sock, MAX_REQUEST, 3)
    except (ConnectionError, OSError):
        return None, []
    return (json.loads(data) if data else None), fds


# -- the server ------------------------------------------------------------------------------------------


def _run_job(request: dict[str, Any], fds: list[int]) -> int:
    """In the forked child: become the job (its own process group, streams, directory, environment,
    threads) and run it; its exit status."""
    os.setsid()  # a process group of its own: a signal to the job reaches what it starts too
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_DFL)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    _python, _m, module, *args = request["argv"]
    import torch

    # the OpenMP runtime read OMP_NUM_THREADS when the server imported torch: apply the job's own
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS") or os.cpu_count() or 1))
    try:
        sys.argv = [module, *args]  # as `python -m module args` (runpy puts the module's path first)
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        return 0
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # as an interpreter would: the traceback on stderr, status 1
        traceback.print_exc()
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


def _fork_job(request: dict[str, Any], fds: list[int], listener: socket.socket, conn: socket.socket) -> int:
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        listener.close()
        conn.close()
        os._exit(_run_job(request, fds))
    for fd in fds:
        os.close(fd)
    return pid


def serve(socket_path: Path, owner: int) -> None:
    """Import `PRELOAD`, then fork one child per request on `socket_path` until the process `owner`
    (Snakemake) is gone; then kill what still runs and end, printing the CPU seconds of its imports
    (`core.phases`: the jobs' own lines no longer hold them) and how many jobs it ran."""
    for module in PRELOAD:
        importlib.import_module(module)
    imports, served = time.process_time(), 0
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(str(socket_path))
    listener.listen(64)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, ("accept", None))
    jobs: dict[int, tuple[socket.socket, int]] = {}  # child pid -> (client connection, pidfd)
    try:
        while os.getppid() == owner:
            for key, _ in selector.select(timeout=1.0):
                kind, pid = key.data
                if kind == "accept":
                    conn, _ = listener.accept()
                    selector.register(conn, selectors.EVENT_READ, ("request", None))
                elif kind == "request":
                    request, fds = _receive(key.fileobj)
                    selector.unregister(key.fileobj)
                    if request is None or len(fds) != 3:
                        key.fileobj.close()
                        continue
                    pid = _fork_job(request, fds, listener, key.fileobj)
                    served += 1
                    _send(key.fileobj, {"pid": pid})
                    pidfd = os.pidfd_open(pid)
                    jobs[pid] = (key.fileobj, pidfd)
                    selector.register(pidfd, selectors.EVENT_READ, ("exited", pid))
                    selector.register(key.fileobj, selectors.EVENT_READ, ("client", pid))
                elif kind == "exited":
                    conn, pidfd = jobs.pop(pid)
                    _, status = os.waitpid(pid, 0)
                    selector.unregister(pidfd)
                    os.close(pidfd)
                    if conn.fileno() in selector.get_map():
                        selector.unregister(conn)
                    try:
                        _send(conn, {"status": os.waitstatus_to_exitcode(status)})
                    except OSError:
                        pass
                    conn.close()
                elif pid in jobs:  # the client is gone (killed): so is its job
                    _kill_group(pid, signal.SIGKILL)
                    selector.unregister(key.fileobj)
    finally:
        for pid in jobs:
            _kill_group(pid, signal.SIGKILL)
        for pid in jobs:
            os.waitpid(pid, 0)
        listener.close()
        socket_path.unlink(missing_ok=True)
        print(f"job server: {served} jobs; {summary(imports)}", flush=True)


def _kill_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass


# -- the client ------------------------------------------------------------------------------------------


def client(argv: list[str]) -> int:
    """Run `python argv...` as a job of the server named in the environment, or, for anything else
    or without a server, in this process's place (exec)."""
    python = os.environ.get(PYTHON_VARIABLE) or sys.executable
    path = os.environ.get(SOCKET_VARIABLE)
    if argv[:1] != ["-m"] or argv[1:2] not in [[m] for m in SERVED] or not path:
        os.execv(python, [python, *argv])
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        sock.connect(path)
    except OSError:
        os.execv(python, [python, *argv])
    _send(sock, {"argv": [python, *argv], "cwd": os.getcwd(), "env": dict(os.environ)}, [0, 1, 2])
    started, _ = _receive(sock)
    if started is None:
        print(f"error: the job server at {path} closed before starting the job", file=sys.stderr)
        return 1
    child = started["pid"]
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: _kill_group(child, signum))
    ended, _ = _receive(sock)
    if ended is None:
        print(f"error: the job server at {path} ended while job {child} ran", file=sys.stderr)
        return 1
    status = ended["status"]
    return status if status >= 0 else 128 - status  # a signal's death, as a shell reports it


# -- the workflow's side ---------------------------------------------------------------------------------


#: set to 0 to run every job in a process of its own (as on a cluster)
SWITCH_VARIABLE = "WORKBENCH_WARM_JOBS"


#: the rules whose jobs do not run a `SERVED` module (the report runs `python -m report`)
UNSERVED_RULES = ("all", "report")


def wanted(local: bool, own_environments: bool, rules: list[str],
           environ: dict[str, str] | os._Environ = os.environ) -> bool:
    """Whether a workflow run should start a server: a local run whose jobs share Snakemake's
    interpreter (not under --use-conda) with at least two jobs to serve among those of `rules`
    (a server imports what one job would), unless WORKBENCH_WARM_JOBS=0."""
    served = sum(rule not in UNSERVED_RULES for rule in rules)
    return local and not own_environments and served >= 2 and environ.get(SWITCH_VARIABLE, "1") != "0"


def start(log: Path, environ: dict[str, str] | os._Environ = os.environ) -> subprocess.Popen | None:
    """Start a server for this process (Snakemake), its output in `log`, and point `environ`'s
    WORKBENCH_PYTHON at the warm interpreter; None, changing nothing, when it does not answer
    within `START_TIMEOUT_S`."""
    python = environ.get("WORKBENCH_PYTHON") or sys.executable
    path = Path(tempfile.gettempdir()) / f"workbench-jobs-{os.getpid()}-{time.monotonic_ns()}.sock"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a") as out:
        proc = subprocess.Popen([python, "-m", "workbench.job_server", "serve", str(path), str(os.getpid())],
                                start_new_session=True, env=dict(environ), stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT)
    deadline = time.monotonic() + START_TIMEOUT_S
    while not path.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            print("job server: not started; every job imports torch itself", file=sys.stderr)
            return None
        time.sleep(0.05)
    environ.update({SOCKET_VARIABLE: str(path), PYTHON_VARIABLE: python, "WORKBENCH_PYTHON": str(WARM_PYTHON)})
    return proc


def stop(proc: subprocess.Popen | None, environ: dict[str, str] | os._Environ = os.environ) -> None:
    """End the server `start` made (its running jobs with it) and restore WORKBENCH_PYTHON."""
    if proc is None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
    environ["WORKBENCH_PYTHON"] = environ.pop(PYTHON_VARIABLE)
    environ.pop(SOCKET_VARIABLE, None)


def main(argv: list[str]) -> int:
    if argv[:1] == ["serve"]:
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # runs `serve`'s cleanup
        serve(Path(argv[1]), int(argv[2]))
        return 0
    if argv[:1] == ["client"]:
        return client(argv[1:])
    print("usage: python -m workbench.job_server serve SOCKET OWNER_PID | client PYTHON_ARGS...", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
