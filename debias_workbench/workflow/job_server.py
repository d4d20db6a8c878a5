"""A warm interpreter for the jobs of a local run: torch imported once, every job forked from it.

A generation, training, scoring or analysis job is a process of its own (`python -m debias_workbench generate ...`,
`... train ...`), and on a CPU it spends seconds importing torch, torchvision and the
package before its first step: a third of a small demo job, two thirds of a smoke-mode one. For a
local run (`snakemake --cores N`) the Snakefile's `onstart` starts a server (`serve`) that imports
them once and listens on a Unix socket; the rules' interpreter (`WORKBENCH_PYTHON`) becomes
`warm_python` beside this module, whose client (`client`) hands the job's arguments, working
directory, environment and standard streams to the server, which forks a child to run the module
as `python -m` would (`workflow.forked_job`). The job is the same code with the same arguments
and seeds: only the import is shared.

A job stays a job: the client waits for the child's exit status and returns it; a signal to the
client (Ctrl-C's SIGINT, a SIGTERM) goes to the child's process group; when the client dies (SIGKILL
of the whole workflow) the server kills the child, and when the server dies the client does;
when Snakemake itself is gone the server ends. Anything else the client runs (`... report`,
`-m torch.distributed.run`, ...) it runs as before, and so it does when no server answers or the
server declines (a job whose interpreter settings differ from its own). Cluster runs
(`--executor slurm`) never start one. docs/workflow.md says what a forked job shares and what not.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import selectors
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from debias_workbench.core.phases import summary

from .forked_job import JOB_SIGNALS, fork_job

#: what the server imports once for every job it forks (torchvision: the ResNets; it also
#: imports torch._dynamo, which torch's optimisers import on first use), and then every registered
#: dataset family's module (`family_modules`); not the `__main__` modules: runpy runs those anew for each job
PRELOAD = (
    "torch",
    "torchvision",
    *(
        f"debias_workbench.{m}"
        for m in (
            "cli",
            "training.cli",
            "training.models",
            "training.runs",
            "training.trainer",
            "training.evaluation",
            "training.analysis",
            "pipeline.cli",
            "pipeline.fingerprint",
            "pipeline.segment_stage",
            "pipeline.variant_stage",
            "pipeline.derived_stage",
        )
    ),
)
#: the module whose jobs (`python -m debias_workbench COMMAND ...`) the client hands to the server
SERVED_MODULE = "debias_workbench"
#: the `workbench` subcommands (`debias_workbench.cli`) a server runs: those that load torch or the generation code
SERVED_COMMANDS = ("generate", "verify", "train", "prerequisite", "evaluate", "evaluate-imagenet", "analyse")
#: environment of the client: the server's socket, and the interpreter to run anything else with
SOCKET_VARIABLE, PYTHON_VARIABLE = "WORKBENCH_JOB_SERVER", "WORKBENCH_REAL_PYTHON"
#: the interpreter the rules run when a server is up (a shell script calling `client`)
WARM_PYTHON = Path(__file__).with_name("warm_python")
#: the largest request (arguments, working directory, environment) a client sends
MAX_REQUEST = 1 << 20
#: how long `start` waits for the server's imports before going on without it
START_TIMEOUT_S = 120.0
#: the file beside the socket that says the server listens
READY = "ready"


def _send(sock: socket.socket, message: dict[str, Any], fds: Sequence[int] = ()) -> None:
    socket.send_fds(sock, [json.dumps(message).encode()], list(fds))


def _receive(sock: socket.socket) -> tuple[dict[str, Any] | None, list[int]]:
    """One message and the descriptors sent with it; (None, []) when the other end is gone."""
    try:
        data, fds, _flags, _addr = socket.recv_fds(sock, MAX_REQUEST, 3)
    except (ConnectionError, OSError):
        return None, []
    return (json.loads(data) if data else None), fds


def _interpreter_variables(environ: dict[str, str] | os._Environ) -> dict[str, str]:
    """The variables the interpreter reads only when it starts (PYTHONHASHSEED, PYTHONOPTIMIZE, ...)."""
    return {k: v for k, v in environ.items() if k.startswith("PYTHON") and k != "PYTHONPATH"}


def served(argv: list[str]) -> bool:
    """Whether `python argv...` is a job a server runs: `-m debias_workbench` with one of the
    `SERVED_COMMANDS` (not the report)."""
    return argv[:2] == ["-m", SERVED_MODULE] and argv[2:3] in [[c] for c in SERVED_COMMANDS]


# -- the server ------------------------------------------------------------------------------------------


def _refusal(request: dict[str, Any], fds: list[int], conn: socket.socket) -> str | None:
    """Why this server must not run `request` (a job it cannot run as a fresh `python -m` would), or None."""
    uid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))[1]
    if uid != os.getuid():
        return f"the client runs as user {uid}"
    if len(fds) != 3 or not served(request.get("argv", [])[1:]):
        return "not a job this server runs"
    if _interpreter_variables(request["env"]) != _interpreter_variables(os.environ):
        return "the job's PYTHON* variables differ from the server's, which its interpreter read at start"
    return None


class _Server:
    """The selector loop of `serve`: connections, the jobs' children (pidfds), their clients."""

    def __init__(self, listener: socket.socket):
        self.listener, self.selector, self.served = listener, selectors.DefaultSelector(), 0
        self.selector.register(listener, selectors.EVENT_READ, ("accept", None))
        self.jobs: dict[int, tuple[socket.socket, int]] = {}  # child pid -> (client connection, pidfd)

    def inherited(self) -> list[int]:
        return [
            self.listener.fileno(),
            self.selector.fileno(),
            *(fd for conn, pidfd in self.jobs.values() for fd in (conn.fileno(), pidfd)),
            *(key.fd for key in self.selector.get_map().values() if key.data[0] == "request"),
        ]

    def handle(self, key: selectors.SelectorKey) -> None:
        kind, pid = key.data
        if kind == "accept":
            conn, _ = self.listener.accept()
            self.selector.register(conn, selectors.EVENT_READ, ("request", None))
        elif kind == "request":
            assert isinstance(key.fileobj, socket.socket)  # registered by "accept" above
            self._request(key.fileobj)
        elif kind == "exited":
            self._exited(pid)
        elif pid in self.jobs:  # the client is gone (killed): so is its job
            self.selector.unregister(key.fileobj)
            _kill(pid, signal.SIGKILL)

    def _request(self, conn: socket.socket) -> None:
        self.selector.unregister(conn)
        request, fds = _receive(conn)
        if request is None or (reason := _refusal(request, fds, conn)):
            for fd in fds:
                os.close(fd)
            if request is not None:
                with contextlib.suppress(OSError):
                    _send(conn, {"refused": reason})
            conn.close()
            return
        pid = fork_job(request, fds, [conn.fileno(), *self.inherited()])
        self.served += 1
        pidfd = os.pidfd_open(pid)
        self.jobs[pid] = (conn, pidfd)
        self.selector.register(pidfd, selectors.EVENT_READ, ("exited", pid))
        self.selector.register(conn, selectors.EVENT_READ, ("client", pid))
        try:
            _send(conn, {"pid": pid})
        except OSError:  # the client died before it heard the pid
            _kill(pid, signal.SIGKILL)

    def _exited(self, pid: int) -> None:
        conn, pidfd = self.jobs.pop(pid)
        _, status = os.waitpid(pid, 0)
        self.selector.unregister(pidfd)
        os.close(pidfd)
        if conn.fileno() in self.selector.get_map():
            self.selector.unregister(conn)
        with contextlib.suppress(OSError):
            _send(conn, {"status": os.waitstatus_to_exitcode(status)})
        conn.close()

    def close(self) -> None:
        for pid in self.jobs:
            _kill(pid, signal.SIGKILL)
        for pid in self.jobs:
            os.waitpid(pid, 0)
        self.selector.close()
        self.listener.close()


def serve(socket_path: Path, owner: int) -> None:
    """Listen on `socket_path`, import `PRELOAD` and the families' modules, then fork one child per request
    until the process `owner` (Snakemake) is gone; then kill what still runs and end, printing the CPU seconds of its
    imports (`core.phases`: the jobs' own lines no longer hold them) and how many jobs it ran."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(str(socket_path))  # before the imports: a path too long fails at once
    from debias_workbench.pipeline.datasets import family_modules  # here: a client never reads the registry

    for module in (*PRELOAD, *family_modules()):
        importlib.import_module(module)
    imports = time.process_time()
    listener.listen(64)
    (socket_path.parent / READY).touch()
    server = _Server(listener)
    try:
        while os.getppid() == owner:
            for key, _ in server.selector.select(timeout=1.0):
                try:
                    server.handle(key)
                except Exception:  # one bad request or connection must not end the others' jobs
                    traceback.print_exc()
                    with contextlib.suppress(Exception):
                        server.selector.unregister(key.fileobj)
    finally:
        server.close()
        shutil.rmtree(socket_path.parent, ignore_errors=True)
        print(f"job server: {server.served} jobs; {summary(imports)}", flush=True)


def _kill(pid: int, sig: int) -> None:
    """`sig` to the job's process group, or to the job alone before it has made its group."""
    with contextlib.suppress(ProcessLookupError):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            os.kill(pid, sig)


# -- the client ------------------------------------------------------------------------------------------


def client(argv: list[str]) -> int:
    """Run `python argv...` as a job of the server named in the environment, or, for anything else,
    without a server or where the server declines, in this process's place (exec)."""
    python = os.environ.get(PYTHON_VARIABLE) or sys.executable
    path = os.environ.get(SOCKET_VARIABLE)
    if not served(argv) or not path:
        os.execv(python, [python, *argv])
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        sock.connect(path)
        _send(sock, {"argv": [python, *argv], "cwd": os.getcwd(), "env": dict(os.environ)}, [0, 1, 2])
    except OSError:  # no server, or a request too large for one message: nothing has started yet
        os.execv(python, [python, *argv])
    started, _ = _receive(sock)
    if started is None or "refused" in started:
        os.execv(python, [python, *argv])
    child = started["pid"]
    for sig in JOB_SIGNALS:
        signal.signal(sig, lambda signum, _frame: _kill(child, signum))
    ended, _ = _receive(sock)
    if ended is None:  # the server died: its job must not run on unwatched
        _kill(child, signal.SIGKILL)
        print(f"error: the job server at {path} ended while job {child} ran; the job was killed", file=sys.stderr)
        return 1
    status = ended["status"]
    return status if status >= 0 else 128 - status  # a signal's death, as a shell reports it


# -- the workflow's side ---------------------------------------------------------------------------------


#: set to 0 to run every job in a process of its own (as on a cluster)
SWITCH_VARIABLE = "WORKBENCH_WARM_JOBS"


#: the rules whose jobs a server does not run (`served`: the report)
UNSERVED_RULES = ("all", "report", "job_config")


def wanted(
    local: bool,
    own_environments: bool,
    touch: bool,
    rules: list[str],
    environ: dict[str, str] | os._Environ = os.environ,
) -> bool:
    """Whether a workflow run should start a server: a local run (not --touch) whose jobs share
    Snakemake's interpreter (not under --use-conda) with at least two jobs to serve among those of
    `rules` (a server imports what one job would), unless WORKBENCH_WARM_JOBS=0."""
    served = sum(rule not in UNSERVED_RULES for rule in rules)
    return local and not own_environments and not touch and served >= 2 and environ.get(SWITCH_VARIABLE, "1") != "0"


def start(log: Path, environ: dict[str, str] | os._Environ = os.environ) -> subprocess.Popen | None:
    """Start a server for this process (Snakemake), its output in `log`, and point `environ`'s
    WORKBENCH_PYTHON at the warm interpreter once it listens; None, changing nothing, when it does
    not within `START_TIMEOUT_S`. Its socket lies in a folder only this user can enter."""
    python = environ.get("WORKBENCH_PYTHON") or sys.executable
    folder = Path(tempfile.mkdtemp(prefix="workbench-jobs-"))
    path = folder / "socket"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a") as out:
        command = [python, "-m", "debias_workbench.workflow.job_server", "serve", str(path), str(os.getpid())]
        proc = subprocess.Popen(
            command,
            start_new_session=True,
            env=dict(environ),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + START_TIMEOUT_S
    while not (folder / READY).exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            shutil.rmtree(folder, ignore_errors=True)
            print(f"job server: not started (see {log}); every job imports torch itself", file=sys.stderr)
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
    print(
        "usage: python -m debias_workbench.workflow.job_server serve SOCKET OWNER_PID | client PYTHON_ARGS...",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
