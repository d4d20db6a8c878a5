"""A job of the warm interpreter (`workflow.job_server`) in its forked child: the child takes the
job's process group, standard streams, working directory, environment, signal handlers and thread
limits, as a fresh `python -m` would have them, then runs the module as `python -m` does and exits
with its status. Apart from the server's loop: this is the part that makes a forked job the same
job as one in a process of its own (docs/workflow.md says what it shares and what not).
"""

from __future__ import annotations

import atexit
import os
import runpy
import signal
import sys
import tempfile
import traceback
from typing import Any

#: the signals a job's client passes on to the job (Ctrl-C reaches the clients as SIGINT)
JOB_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _become_job(request: dict[str, Any], fds: list[int]) -> None:
    """In the forked child: the job's process group, streams, directory, environment, signal handlers
    (those of a fresh interpreter) and threads; settings read at import time read again."""
    os.setsid()  # a process group of its own: a signal to the job reaches what it starts too
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # KeyboardInterrupt: finally blocks and atexit run
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    import dask
    import torch
    import zarr
    from threadpoolctl import threadpool_limits

    tempfile.tempdir = None  # TMPDIR (Snakemake's resources.tmpdir) read anew
    zarr.config.refresh()
    dask.config.refresh()
    if threads := os.environ.get("OMP_NUM_THREADS"):  # the runtimes read it when the server imported them
        threadpool_limits(int(threads))  # OpenMP, OpenBLAS, MKL
        torch.set_num_threads(int(threads))


def _run_module(argv: list[str]) -> int:
    """`python -m module args` (argv: interpreter, -m, module, args) in this process; its exit status."""
    _python, _m, module, *args = argv
    try:
        sys.argv = [module, *args]  # runpy puts the module's path first, as `python -m` does
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        return 0
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code, file=sys.stderr)  # sys.exit("message"), as the interpreter reports it
        return 1
    except KeyboardInterrupt:  # Ctrl-C: the traceback, and the status of a death by SIGINT
        traceback.print_exc()
        return 128 + signal.SIGINT
    except BaseException:  # as the interpreter would: the traceback on stderr, status 1
        traceback.print_exc()
        return 1


def fork_job(request: dict[str, Any], fds: list[int], inherited: list[int]) -> int:
    """Fork the job's child (the job signals held until it has its own handlers); close `inherited`
    (the server's listener, selector, connections and pidfds) in it."""
    sys.stdout.flush()
    sys.stderr.flush()
    held = signal.pthread_sigmask(signal.SIG_BLOCK, JOB_SIGNALS)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:  # nothing of the server's may run in the child, whatever happens
            for fd in inherited:
                os.close(fd)
            _become_job(request, fds)
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
            code = _run_module(request["argv"])
        except BaseException:
            traceback.print_exc()
        finally:
            try:
                atexit._run_exitfuncs()
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
    signal.pthread_sigmask(signal.SIG_SETMASK, held)
    for fd in fds:
        os.close(fd)
    return pid
