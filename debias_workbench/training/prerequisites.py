"""Each run's prerequisite artifacts (`prerequisite_kind`): their job configs, names and files.
Torch-free: the workflow reads it while it parses (rules/prerequisites.smk), the training job to
find a run's files.

A prerequisite's job config is the part of a run's config it depends on: the training store
(dataset and train variant), the seed, the training settings and its kind's own `method_args`
(`PrerequisiteKind.settings`); not the run's name or method, so runs of different methods that
need the same one (LfF+BE and Park et al. on one train variant and seed) share one job and one
file, `<results>/prerequisites/<kind>/<digest>.pt`, named by the digest of its job config's file.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from debias_workbench.core.provenance import job_config_text, text_digest
from debias_workbench.training.run_config import RunConfig

from .methods import PREREQUISITES, spec
from .prerequisite_kind import PrerequisiteKind

#: the folder of the prerequisites under the results folder: <folder>/<kind>/<digest>.pt
PREREQUISITE_DIR = "prerequisites"


@dataclass(frozen=True)
class PrerequisiteJob:
    """One prerequisite the runs need, built once: its kind, job config, digest and first reader."""

    kind: PrerequisiteKind
    config: dict[str, Any]
    digest: str
    first_run: RunConfig

    @property
    def path(self) -> str:
        """Its file under the results folder."""
        return relative_path(self.kind.name, self.digest)


def kind(name: str) -> PrerequisiteKind:
    """The registered kind `name`."""
    if name not in PREREQUISITES:
        raise KeyError(f"unknown prerequisite {name!r}; registered: {sorted(PREREQUISITES)}")
    return PREREQUISITES[name]


def relative_path(kind_name: str, digest: str) -> str:
    """The file of prerequisite `digest` of kind `kind_name` under the results folder."""
    return f"{PREREQUISITE_DIR}/{kind_name}/{digest}.pt"


def job_config(prerequisite: PrerequisiteKind, run: RunConfig) -> dict[str, Any]:
    """The job config of the `prerequisite` of `run` (a run config, `workflow.slices.run_config`)."""
    return {
        "dataset": run["dataset"],
        "dataset_config": run["dataset_config"],
        "train_variant": run["train_variant"],
        "seed": run["seed"],
        "training": run["training"],
        **prerequisite.settings(run["method_args"]),
    }


def digest(cfg: dict[str, Any]) -> str:
    """The name of a prerequisite's file: the digest of its job config's file (`workflow.slices.JobConfigs`)."""
    return text_digest(job_config_text(cfg))


def run_jobs(run: RunConfig) -> list[PrerequisiteJob]:
    """The prerequisites `run` needs (its method's `prerequisites`), in their declared order."""
    out = []
    for name in spec(run["method"]).prerequisites:
        cfg = job_config(kind(name), run)
        out.append(PrerequisiteJob(kind(name), cfg, digest(cfg), run))
    return out


def jobs(runs: Iterable[RunConfig]) -> list[PrerequisiteJob]:
    """Every prerequisite `runs` need, each once, in the order of their first readers: the jobs of the
    workflow's `prerequisite` rule."""
    out: dict[str, PrerequisiteJob] = {}
    for run in runs:
        for job in run_jobs(run):
            out.setdefault(job.path, job)
    return list(out.values())


def files(results: Path, run: RunConfig) -> dict[str, Path]:
    """{kind: file} of the prerequisites of `run` under the results folder `results` ({} without any)."""
    return {job.kind.name: results / job.path for job in run_jobs(run)}
