"""BiasEnsemble's committee (Lee et al., AAAI 2023) as a thing of its own: K early-stopped GCE
models' (K, N) p_y and "argmax != y" on every training row, and their early-stop statistics
(`LfFBiasEnsemble._committee`). The workflow builds each committee once, by its own job
(`training.committee_job`, rule `committee`), into a file that every run using it reads
(`load_committee`); a run given no file trains its committee itself (`train_committee`), with the
same numbers.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from debias_workbench.core.atomic import atomic_path
from debias_workbench.core.seeding import name_seed
from debias_workbench.pipeline.fingerprint import read_fingerprint

from ..committee_config import committee_settings
from ..distributed import rank

if TYPE_CHECKING:
    from .bias_amplification import LfFBiasEnsemble


@dataclass(frozen=True)
class Committee:
    """A trained committee: its identity (`committee_key`), (K, N) p_y, (K, N) wrong votes and the
    statistics of its members' early stop."""

    key: str
    correct_prob: torch.Tensor
    wrong: torch.Tensor
    early_stop: dict[str, float]


def committee_key(method: LfFBiasEnsemble, batches) -> str:
    """The identity of a run's committee, which seeds it: its training rows (the store's content
    fingerprint), the run's seed and training settings, the committee's own arguments and the revision of
    its code (`committee_config.committee_settings`); not the run's name or method, so the runs that
    would train the same committee share one."""
    identity = {
        "store": read_fingerprint(batches.store)["digest"],
        "seed": batches.seed,
        "training": method.cfg,
        **committee_settings(method.args),
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:16]


def train_committee(method: LfFBiasEnsemble, batches) -> Committee:
    """The committee of `method`'s run on its training `batches`, seeded by its identity outside
    the run's random streams (the default one and the method's augmentation generator, which it
    leaves as it found them): the run draws the same numbers after its set-up whether it trained
    the committee or read it from the committee's job. Each process its own augmentation (rank 0:
    the one-process seed), its own shuffling by the committee's name."""
    key = committee_key(method, batches)
    device = next(method.parameters()).device
    augmentation = method.generator.get_state()
    with torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(name_seed("committee", key))  # the CPU's only: the one forked
        method.generator.manual_seed(name_seed("committee augment", key) + rank())
        correct_prob, wrong, early_stop = method._committee(batches.renamed(f"committee {key}"), device)
    method.generator.set_state(augmentation)
    return Committee(key, correct_prob, wrong, early_stop)


def save_committee(committee: Committee, path: Path) -> None:
    """Write `committee` to `path` atomically, its tensors on the CPU."""
    with atomic_path(path) as tmp:
        torch.save(
            {
                "key": committee.key,
                "correct_prob": committee.correct_prob.cpu(),
                "wrong": committee.wrong.cpu(),
                "early_stop": committee.early_stop,
            },
            tmp,
        )


def load_committee(path: Path, key: str, device: torch.device) -> Committee:
    """The committee saved at `path`, on `device`; it must be the one of identity `key` (the run's)."""
    if not path.exists():
        raise FileNotFoundError(f"{path}: this run's committee is not there; its job makes it (snakemake {path})")
    saved = torch.load(path, map_location="cpu", weights_only=True)
    if saved["key"] != key:
        raise ValueError(
            f"{path} holds committee {saved['key']}, but this run's is {key} (another training store, "
            "seed, training settings or committee arguments): rebuild it with the workflow's committee rule"
        )
    return Committee(key, saved["correct_prob"].to(device), saved["wrong"].to(device), saved["early_stop"])
