"""What every job's process starts with, whatever the rule: its environment (malloc's settings, the
interpreter and the checkout on PYTHONPATH, the trackers and runs per GPU) and the shell prefix before its
command. rules/common.smk puts them in the workflow's environment and Snakemake's shell prefix, never in a
rule's command or params: changing them reruns no job."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from debias_workbench.core.names import RUNS_PER_GPU_VARIABLE, TRACKERS_VARIABLE

#: environment of every job's process: glibc's malloc keeps the memory it frees for the next step
#: (it otherwise hands large freed blocks back to the kernel at once, and a CPU training loop
#: page-faults its activations in anew every step: on the demo's IN-9 training about 1.0 M -> 0.15 M
#: page faults and a fifth less CPU, docs/measurements.md). Read by glibc at process start (other C
#: libraries ignore it); rules/common.smk puts it in the workflow's environment, not in the rules'
#: commands, so it is no rule parameter and results made without it are not rerun.
JOB_ENVIRONMENT = {
    "MALLOC_MMAP_THRESHOLD_": "33554432",
    "MALLOC_TRIM_THRESHOLD_": "1073741824",
    "MALLOC_TOP_PAD_": "67108864",
}

#: what Snakemake runs before every job's shell command (its own default for bash, `set -euo pipefail;`,
#: and a trap). A scheduler ends a job (its time limit, a preemption, a requeue, `scancel`) with SIGTERM
#: to every process of the job: a shell that dies of it ends its job step's Snakemake and then the step,
#: whose last processes SLURM kills at once, the trainer among them before it has written the checkpoint it
#: makes on that signal (`training.job_time`). With the signal trapped the shell waits for its command and
#: exits with its status (75: continue in the next job). No rule's command: setting it reruns no job.
SHELL_PREFIX = "set -euo pipefail; trap : TERM; "

#: the command text every rule starts its Python with; the interpreter itself comes from the
#: environment (`interpreter_environment`), with `python` as the fallback so that a command printed
#: by `snakemake -p` runs in a shell as is
PYTHON_COMMAND = '"${WORKBENCH_PYTHON:-python}"'


def interpreter_environment(basedir: str, python: str, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The variables rules/common.smk puts in the workflow's environment so that every job runs
    `python` (the interpreter that runs Snakemake, or "python" inside a job's conda environment)
    with the checkout `basedir` first on PYTHONPATH (after it, what `environ` already holds there).
    They travel in the environment, not in the command text: Snakemake records a job's params and
    shell command, and a path there would rerun every job when the same workflow is started
    through another path to the interpreter (`snakemake` vs `python -m snakemake`, another venv)."""
    paths = [p for p in environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {
        "WORKBENCH_PYTHON": python,
        "PYTHONPATH": os.pathsep.join(paths if paths[:1] == [basedir] else [basedir, *paths]),
    }


def training_environment(training: Mapping[str, Any]) -> dict[str, str]:
    """The variables rules/common.smk puts in the workflow's environment for `training.trackers` and
    `training.runs_per_gpu`: the train (and score) jobs read them as their `--trackers` and
    `--runs-per-gpu` defaults. Like the interpreter, they travel in the environment, not in a command:
    turning TensorBoard on, or packing runs onto a GPU, reruns no job."""
    return {
        TRACKERS_VARIABLE: ",".join(training.get("trackers", [])),
        RUNS_PER_GPU_VARIABLE: str(training.get("runs_per_gpu", 1)),
    }
