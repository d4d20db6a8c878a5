"""A one-node SLURM cluster on localhost, to try and test the workflow's SLURM path for real.

    python -m devtools.local_slurm start [--dir /tmp/workbench-slurm]   # prints: export SLURM_CONF=...
    python -m devtools.local_slurm stop  [--dir /tmp/workbench-slurm]

Debian's `slurm-wlm` (22.05) and `munge` are installed by package name when missing (root and
apt needed). The node is this machine (all its CPUs, 90 % of its memory) in two partitions,
`cpu` (default) and `gpu`; it declares two GPUs backed by plain files, so GPU requests are
scheduled even where there is no GPU (the jobs then train on the CPU; a `training.gpus: 2` run's
job takes both, and its two processes train with gloo). Both daemons listen on
127.0.0.1 only; there is no accounting database, so Snakemake must query job states with
`squeue` (`profiles/slurm-local`). The config is linked from /etc/slurm/slurm.conf (the job
steps do not pass SLURM_CONF on), so no other SLURM may be configured here. `stop` cancels the remaining jobs and ends exactly the
daemons that `start` recorded (munged only if `start` had to start it).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

DEFAULT_DIR = Path("/tmp/workbench-slurm")
PACKAGES = ["slurm-wlm", "munge"]
MUNGE_SOCKET = Path("/run/munge/munge.socket.2")
PORTS = {"slurmctld": 6817, "slurmd": 6818}  # SLURM's defaults
#: where SLURM's commands look without SLURM_CONF. Snakemake's job step (executor plugin
#: slurm-jobstep) drops every SLURM_* variable before its inner `srun`, SLURM_CONF included,
#: so the cluster's config must be found here: `start` links it, `stop` removes the link
SYSTEM_CONF = Path("/etc/slurm/slurm.conf")
#: the daemons' PID files in the cluster folder, in stopping order (munged's only if we started it)
PID_FILES = ("slurmd.pid", "slurmctld.pid", "munged.pid")
#: finished jobs stay visible to `squeue`/`scontrol` this long; the squeue status mode needs
#: at least 3x Snakemake's first status wait, and the tests read the jobs back at the end
MIN_JOB_AGE_S = 3600


class LocalSlurmError(RuntimeError):
    """The installed SLURM did not come up (a daemon failed, the node never became idle)."""


class LocalSlurmUnavailable(LocalSlurmError):
    """SLURM cannot run on this machine at all (not root, packages not installable, another
    SLURM already configured or listening): tests skip on this, not on `LocalSlurmError`."""


@dataclass(frozen=True)
class LocalCluster:
    dir: Path

    @property
    def conf(self) -> Path:
        return self.dir / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """The environment for SLURM commands (and Snakemake) to reach this cluster."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}


def _run(cmd: list[str], env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)


def ensure_installed() -> None:
    """Install slurm-wlm and munge from Debian when their daemons are missing."""
    if all(shutil.which(tool) for tool in ("slurmctld", "slurmd", "munged", "sbatch")):
        return
    if shutil.which("apt-get") is None:
        raise LocalSlurmUnavailable("SLURM is not installed and there is no apt-get to install slurm-wlm and munge")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *PACKAGES]
    proc = _run(install, env, timeout=900)
    if proc.returncode != 0:  # a fresh machine may have no package lists yet
        _run(["apt-get", "update", "-q"], env, timeout=600)
        proc = _run(install, env, timeout=900)
    if proc.returncode != 0:
        raise LocalSlurmUnavailable(f"`{' '.join(install)}` failed: {proc.stderr.strip()[-500:]}")


def node_size() -> tuple[int, int]:
    """(CPUs, memory in MB) the node declares: every CPU this process may use, 90 % of RAM."""
    mem_kb = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                  if line.startswith("MemTotal:"))
    return len(os.sched_getaffinity(0)), int(mem_kb / 1024 * 0.9)


def write_config(cluster: LocalCluster, cred_expire: int | None = None) -> None:
    """slurm.conf and gres.conf of the one-node cluster; `cred_expire` (seconds, SLURM's least is 5) sets
    `AuthInfo=cred_expire`, which is also how long a requeued job waits before it starts again (SLURM's
    default, 120 s, where None)."""
    cpus, mem_mb = node_size()
    d = cluster.dir
    for sub in ("ctld", "slurmd", "log"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    for gpu in ("gpu0", "gpu1"):
        (d / gpu).touch()
    # slurmctld runs as the slurm user: it must reach its state and log folders
    for path in (d, d / "ctld", d / "log"):
        shutil.chown(path, "slurm", "slurm")
    d.chmod(0o755)
    cluster.conf.write_text(f"""\
# Written by python -m devtools.local_slurm: one node (this machine), listening on 127.0.0.1 only
ClusterName=workbench
SlurmctldHost=localhost
SlurmUser=slurm
SlurmdUser=root
CommunicationParameters=NoInAddrAny,NoCtldInAddrAny
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation={d}/ctld
SlurmdSpoolDir={d}/slurmd
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
SlurmdParameters=config_overrides
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
MinJobAge={MIN_JOB_AGE_S}
GresTypes=gpu
NodeName=localhost NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={mem_mb} Gres=gpu:2 State=UNKNOWN
PartitionName=cpu Nodes=localhost Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=localhost MaxTime=INFINITE State=UP
""" + (f"AuthInfo=cred_expire={cred_expire}\n" if cred_expire is not None else ""))
    # a GRES that only has a count leaves the node INVAL in 22.05: back each GPU by a file
    (d / "gres.conf").write_text(f"NodeName=localhost Name=gpu File={d}/gpu0\nNodeName=localhost Name=gpu File={d}/gpu1\n")


def link_system_conf(cluster: LocalCluster) -> None:
    if SYSTEM_CONF.is_symlink() and SYSTEM_CONF.resolve() == cluster.conf:
        return
    if SYSTEM_CONF.exists() or SYSTEM_CONF.is_symlink():
        raise LocalSlurmUnavailable(f"{SYSTEM_CONF} exists (another SLURM configuration); this script links its "
                                    f"own there and will not replace it: move it away first")
    SYSTEM_CONF.parent.mkdir(parents=True, exist_ok=True)
    SYSTEM_CONF.symlink_to(cluster.conf)


def unlink_system_conf(cluster: LocalCluster) -> None:
    if SYSTEM_CONF.is_symlink() and SYSTEM_CONF.resolve() == cluster.conf:
        SYSTEM_CONF.unlink()


def _munge_answers() -> bool:
    if not shutil.which("munge"):
        return False
    proc = subprocess.run("munge -n | unmunge", shell=True, capture_output=True, timeout=10)
    return proc.returncode == 0


def start_munge(cluster: LocalCluster) -> None:
    """Use a running munged, or start one as the munge user and record its PID."""
    if _munge_answers():
        return
    run = MUNGE_SOCKET.parent
    run.mkdir(parents=True, exist_ok=True)
    shutil.chown(run, "munge", "munge")
    if not Path("/etc/munge/munge.key").exists():
        _run(["runuser", "-u", "munge", "--", "mungekey", "--create"])
    proc = _run(["runuser", "-u", "munge", "--", "munged"])
    if proc.returncode != 0:
        raise LocalSlurmError(f"munged did not start: {proc.stderr.strip()}")
    _wait(_munge_answers, 20, "munged to answer")
    pid_file = run / "munged.pid"
    (cluster.dir / "munged.pid").write_text(pid_file.read_text())


def _wait(ready, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > end:
            raise LocalSlurmError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.5)


def _check_ports_free() -> None:
    for daemon, port in PORTS.items():
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as SLURM binds: TIME_WAIT is no clash
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                raise LocalSlurmUnavailable(
                    f"port {port} ({daemon}) is in use: another SLURM runs here; stop it first (a cluster of "
                    f"this script: python -m devtools.local_slurm stop --dir <its folder>)") from None


def node_state(cluster: LocalCluster) -> str:
    proc = _run(["sinfo", "-h", "-N", "-n", "localhost", "-o", "%T"], cluster.env, timeout=20)
    return proc.stdout.split()[0] if proc.returncode == 0 and proc.stdout.split() else ""


def start(directory: Path = DEFAULT_DIR, cred_expire: int | None = None) -> LocalCluster:
    """Install if needed, configure (`write_config`, with `cred_expire`) and start the cluster; return
    once the node is idle."""
    if os.geteuid() != 0:
        raise LocalSlurmUnavailable("the local SLURM cluster needs root (slurmd runs as root, the others as their users)")
    ensure_installed()
    cluster = LocalCluster(Path(directory).resolve())
    if (cluster.dir / "slurmctld.pid").exists():
        stop(cluster.dir)  # a cluster left over from a killed run
    _check_ports_free()
    write_config(cluster, cred_expire)
    link_system_conf(cluster)
    start_munge(cluster)
    env = cluster.env
    for cmd in (["runuser", "-u", "slurm", "--", "slurmctld", "-f", str(cluster.conf)],
                ["slurmd", "-f", str(cluster.conf)]):
        proc = _run(cmd, env)
        if proc.returncode != 0:
            stop(cluster.dir)
            raise LocalSlurmError(f"`{' '.join(cmd)}` failed ({proc.returncode}): {proc.stderr.strip()}; "
                                        f"see {cluster.dir / 'log'}")
    try:
        _wait(lambda: node_state(cluster) == "idle", 90, "the node to become idle in `sinfo`")
    except LocalSlurmError as err:
        reason = _run(["sinfo", "-R"], env).stdout.strip()
        stop(cluster.dir)
        raise LocalSlurmError(f"{err} (node state {node_state(cluster)!r}; {reason}; logs in "
                                    f"{cluster.dir / 'log'})") from None
    if len(recorded_pids(cluster.dir)) < 2:
        stop(cluster.dir)
        raise LocalSlurmError(f"slurmctld or slurmd exited after start; see {cluster.dir / 'log'}")
    return cluster


def _pid(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def is_running(pid: int) -> bool:
    """Running and not a zombie (from /proc: no procps needed)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def running_job_steps() -> list[int]:
    """PIDs of slurmstepd processes (a job step outliving its daemons)."""
    pids = []
    for comm in Path("/proc").glob("[0-9]*/comm"):
        try:
            if comm.read_text().strip() == "slurmstepd":
                pids.append(int(comm.parent.name))
        except OSError:
            continue
    return pids


def recorded_pids(directory: Path = DEFAULT_DIR) -> list[int]:
    """PIDs of the daemons `start` recorded under `directory` that are still running."""
    d = Path(directory)
    pids = [_pid(d / name) for name in PID_FILES]
    return [pid for pid in pids if pid is not None and is_running(pid)]


def stop(directory: Path = DEFAULT_DIR) -> None:
    """Cancel every job, then end the recorded daemons (TERM, then KILL after 15 s)."""
    cluster = LocalCluster(Path(directory).resolve())
    if cluster.conf.exists() and shutil.which("squeue"):
        jobs = _run(["squeue", "-h", "-o", "%i"], cluster.env, timeout=20).stdout.split()
        if jobs:
            _run(["scancel", *jobs], cluster.env, timeout=20)
            end = time.monotonic() + 30
            while time.monotonic() < end and _run(["squeue", "-h", "-t", "R,CG", "-o", "%i"], cluster.env,
                                                  timeout=20).stdout.split():
                time.sleep(0.5)
    for name in PID_FILES:
        pid = _pid(cluster.dir / name)
        if pid is None or not is_running(pid):
            continue
        os.kill(pid, signal.SIGTERM)
        end = time.monotonic() + 15
        while is_running(pid) and time.monotonic() < end:
            time.sleep(0.2)
        if is_running(pid):
            os.kill(pid, signal.SIGKILL)
    for name in PID_FILES:
        (cluster.dir / name).unlink(missing_ok=True)
    unlink_system_conf(cluster)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.local_slurm", description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=["start", "stop"])
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help=f"state, logs and slurm.conf (default {DEFAULT_DIR})")
    args = parser.parse_args(argv)
    try:
        if args.action == "start":
            cluster = start(args.dir)
            print(f"export SLURM_CONF={cluster.conf}")
        else:
            stop(args.dir)
    except LocalSlurmError as err:
        print(f"local SLURM: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
