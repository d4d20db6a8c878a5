"""The committee's job (`committee_artifact.COMMITTEE`'s builder: `workbench prerequisite --kind committee`,
the workflow's `prerequisite` rule): one BiasEnsemble committee (`methods.committee`) trained on a
training store and written to its file, which every run that uses it reads instead of training it
(`trainer.train`'s `prerequisites`).

The job builds the committee as a run's set-up would: the run's training batches (its batch size,
loader and, with `training.gpus` N > 1, N processes each with its share of every batch) and an
LfF+BE method of the run's training settings, seeded by the committee's identity alone; so the
file holds the numbers the run would have drawn itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from debias_workbench.training.run_config import RunConfig

from .. import distributed
from ..build import build_method, pick_device
from ..settings import TrainingSettings
from ..trainer import check_processes, training_batches
from .bias_amplification import LfFBiasEnsemble
from .committee import save_committee, train_committee
from .committee_artifact import COMMITTEE

#: the method a committee job builds to train the committee with (any method of a committee trains the same one)
COMMITTEE_METHOD = "lff_be"


def committee_run(job_cfg: dict[str, Any]) -> RunConfig:
    """A run config of the committee's job config (`prerequisites.job_config`): what building
    the method and the training batches read."""
    return {
        "experiment": "committee",
        "seed": job_cfg["seed"],
        "method": COMMITTEE_METHOD,
        "method_args": job_cfg[COMMITTEE.name],
        "training": job_cfg["training"],
    }


def build_committee(job_cfg: dict[str, Any], train_store: Path, out: Path) -> None:
    """Train the committee of `job_cfg` on `train_store` and write it to `out` (rank 0, atomically)."""
    distributed.init_from_env()
    run_cfg = committee_run(job_cfg)
    settings = TrainingSettings.of(run_cfg["training"])
    check_processes(run_cfg, settings)
    device = pick_device(settings.deterministic, tf32=settings.amp)
    batches = training_batches(run_cfg, settings, train_store, {}, device)
    method = build_method(run_cfg, len(batches.classes), device)
    assert isinstance(method, LfFBiasEnsemble)  # COMMITTEE_METHOD's class
    committee = train_committee(method, batches)
    if distributed.is_main():
        save_committee(committee, out)
    distributed.barrier()  # the others end once the file is there
