"""What a BiasEnsemble committee (`methods.committee`) is made of, and where the workflow keeps it.
Torch-free: the workflow reads it while it parses (rules/committees.smk), the training job to find
a run's committee file.

A committee's job config is the part of a run's config it depends on: the training store (dataset
and train variant), the seed, the training settings and the committee's own `method_args`; not the
run's name or method, so LfF+BE and Park et al. on one train variant and seed share one committee
(one job, one file), as the authors' code draws the same one for both from its global seed.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from debias_workbench.core.provenance import job_config_text, text_digest

#: the method_args a committee depends on (the others, `confidence` among them, are its runs' own)
COMMITTEE_ARGS = ("committee_size", "committee_steps", "committee_valid_every", "committee_vote", "q")
#: the revision of the committee's code (`methods.committee`, `LfFBiasEnsemble._committee`): raised with a fix
#: that moves a committee's votes, so that every committee (and, through its file, every run reading it) is
#: made again; kept apart from the methods' revisions so that LfF+BE and Park et al. still share one. 0 enters
#: no identity (neither the job config's digest nor the key that seeds it)
COMMITTEE_REVISION = 0
#: the folder of the committee files under the results folder: <folder>/<digest>/committee.pt
COMMITTEE_DIR = "committees"
#: a committee's file in its folder
COMMITTEE_FILE = "committee.pt"


def committee_config(run: dict[str, Any]) -> dict[str, Any] | None:
    """The job config of the committee of `run` (a run config, `workflow.slices.run_config`), or
    None for a run of a method without one."""
    if "committee_steps" not in run["method_args"]:
        return None
    return {
        "dataset": run["dataset"],
        "dataset_config": run["dataset_config"],
        "train_variant": run["train_variant"],
        "seed": run["seed"],
        "training": run["training"],
        **committee_settings(run["method_args"]),
    }


def committee_settings(method_args: dict[str, Any]) -> dict[str, Any]:
    """What a committee is of its runs' `method_args` (`COMMITTEE_ARGS`) and of its code (`COMMITTEE_REVISION`,
    where not 0): part of its job config and of the key that seeds it (`methods.committee.committee_key`)."""
    return {
        "committee": {k: method_args[k] for k in COMMITTEE_ARGS},
        **({"revision": COMMITTEE_REVISION} if COMMITTEE_REVISION else {}),
    }


def committee_digest(cfg: dict[str, Any]) -> str:
    """The name of a committee's folder: the digest of its job config's file (`workflow.slices.JobConfigs`)."""
    return text_digest(job_config_text(cfg))


def committees(runs: Iterable[dict[str, Any]]) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """{digest: (job config, the first of `runs` that reads it)} of every committee `runs` read, each once,
    in the order of their first readers: the jobs of the workflow's `committee` rule."""
    out: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
    for run in runs:
        if (cfg := committee_config(run)) is not None:
            out.setdefault(committee_digest(cfg), (cfg, run))
    return out


def committee_file(folder: Path, run: dict[str, Any]) -> Path | None:
    """Where the committee of `run` lies in `folder` (the results' `COMMITTEE_DIR`), or None without one."""
    cfg = committee_config(run)
    return None if cfg is None else folder / committee_digest(cfg) / COMMITTEE_FILE
