"""BiasEnsemble's committee (Lee et al., AAAI 2023) as a thing of its own: K early-stopped GCE
models' (K, N) p_y and "argmax != y" on every training row, and their early-stop statistics
(`committee_votes`: each member trained, kept at its voting checkpoint, then scored). The workflow
builds each committee once, by its own job (`committee_job`, the workflow's `prerequisite` rule), into a file
that every run using it reads (`load_committee`); a run given no file trains its committee itself
(`train_committee`), with the same numbers. Its functions take any `Method` whose `args` hold the
committee's arguments (`COMMITTEE.args`: LfF+BE's and Park et al.'s), typed by the base class so that
the methods that read a committee and the committee import in one direction only.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from debias_workbench.core.atomic import atomic_path
from debias_workbench.core.seeding import name_seed
from debias_workbench.pipeline.fingerprint import read_fingerprint

from ..distributed import broadcast_batch_norm_, broadcast_state_, rank, sum_over_processes, world
from ..evaluation import accuracy, predict_store
from ..models import build_network
from .amplification_parts import checkpoint_steps, gce_loss
from .base import Method
from .committee_artifact import COMMITTEE


@dataclass(frozen=True)
class Committee:
    """A trained committee: its identity (`committee_key`), (K, N) p_y, (K, N) wrong votes and the
    statistics of its members' early stop."""

    key: str
    correct_prob: torch.Tensor
    wrong: torch.Tensor
    early_stop: dict[str, float]


def committee_key(method: Method, batches) -> str:
    """The identity of a run's committee, which seeds it: its training rows (the store's content
    fingerprint), the run's seed and training settings, the committee's own arguments and the revision of
    its code (`COMMITTEE.settings`, `committee_artifact`); not the run's name or method, so the runs that
    would train the same committee share one."""
    identity = {
        "store": read_fingerprint(batches.store)["digest"],
        "seed": batches.seed,
        "training": method.cfg,
        **COMMITTEE.settings(method.args),
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:16]


def train_committee(method: Method, batches) -> Committee:
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
        correct_prob, wrong, early_stop = committee_votes(method, batches.renamed(f"committee {key}"), device)
    method.generator.set_state(augmentation)
    return Committee(key, correct_prob, wrong, early_stop)


def committee_votes(
    method: Method, batches, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor, dict[str, float]]:
    """(K, N) p_y and (K, N) "argmax != y" of K GCE models, each at its voting checkpoint
    (`committee_member`), on every training row (`_score`), and statistics of the members' early stop,
    as BiasEnsemble's `pretrain_b_ensemble_best` (learner.py:425-480)."""
    n, k_members = batches.n, method.args["committee_size"]
    correct_prob = torch.zeros(k_members, n, device=device)
    wrong = torch.zeros(k_members, n, dtype=torch.bool, device=device)
    best_steps, best_accs = [], []
    for k in range(k_members):
        member, best_step, best_acc = committee_member(method, k, batches, device)
        best_steps.append(best_step)
        best_accs.append(best_acc)
        _score(method, member, batches, device, correct_prob[k], wrong[k])
    # every row was scored by one process: the sums hold each row's scores, the same on every process
    correct_prob, wrong = sum_over_processes(correct_prob), sum_over_processes(wrong.to(torch.uint8)).bool()
    return (
        correct_prob,
        wrong,
        {
            "committee_best_step_mean": sum(best_steps) / k_members,
            "committee_best_step_min": float(min(best_steps)),
            "committee_valid_accuracy_mean": sum(best_accs) / k_members,
        },
    )


def committee_member(method: Method, k: int, batches, device: torch.device) -> tuple[torch.nn.Module, int, float]:
    """Committee member `k` trained `committee_steps` GCE steps from its own initialisation and
    shuffling, returned at its voting checkpoint with that checkpoint's step and val accuracy.
    The candidates are `checkpoint_steps` (BiasEnsemble: after updates 1 and 501 of 1,000, never
    the last); a later one replaces the kept one only if its val accuracy is strictly higher, so
    the earliest of equals votes (learner.py:364; the authors start from 0 %, and a member that
    scores 0 % at every candidate leaves them no model: here the first candidate stands)."""
    total = method.args["committee_steps"]
    candidates = set(checkpoint_steps(total, method.args["committee_valid_every"], method.args["committee_vote"]))
    member = build_network(method.cfg["arch"], method.num_classes, method.cfg).to(device)
    broadcast_state_(member)  # the same member on every process, not only the same RNG state
    opt = method.make_optimizer(member.parameters())
    best_acc, best_state, best_step = -1.0, None, 0
    member.train()
    steps, epoch = 0, 0
    while steps < total:
        # each member its own shuffling: the loader's epochs from a member-specific offset
        for batch in batches.epoch(1_000_000 * (k + 1) + epoch):
            x = method.augment(batch["images"].to(device))
            with method.autocast():
                loss = gce_loss(member(x).float(), batch["labels"].to(device), method.args["q"]).mean()
            method.step(opt, loss)
            broadcast_batch_norm_(member)  # the same member on every process: its val scores decide
            steps += 1
            if steps in candidates:
                acc = _val_accuracy(method, member, batches.store, device)
                if acc > best_acc:
                    best_acc, best_step, best_state = acc, steps, copy.deepcopy(member.state_dict())
                member.train()
            if steps >= total:
                break
        epoch += 1
    assert best_state is not None  # every candidate step is at most `total`, which the loop reaches
    member.load_state_dict(best_state)
    return member, best_step, best_acc


def _score(
    method: Method,
    member: torch.nn.Module,
    batches,
    device: torch.device,
    correct_prob: torch.Tensor,
    wrong: torch.Tensor,
) -> None:
    """Fill (N,) `correct_prob` (p_y) and `wrong` ("argmax != y") with `member`'s scores, in eval
    mode, of every training row through the training transforms (one random view a row, drawn
    from the method's augmentation generator), as BiasEnsemble scores its `pretrain_loader`: the
    training set with its training transform (learner.py:66-73, 115-122, 471-478; random crops
    and flips on BFFHQ and BAR, nothing on Colored MNIST). Each process scores its share."""
    member.eval()
    with torch.no_grad():
        for i, batch in enumerate(batches.in_order()):
            if i % world() != rank():
                continue
            index, y = batch["index"].to(device), batch["labels"].to(device)
            with method.autocast():
                logits = member(method.augment(batch["images"].to(device))).float()
            correct_prob[index] = F.softmax(logits, 1).gather(1, y[:, None]).squeeze(1)
            wrong[index] = logits.argmax(1) != y


def _val_accuracy(method: Method, model: torch.nn.Module, store: Path, device: torch.device) -> float:
    """Accuracy (%) of `model` in eval mode on the val split of `store`, un-augmented (as the
    trainer's model-selection points are scored)."""
    model.eval()
    with torch.no_grad(), method.autocast():
        return accuracy(predict_store(lambda x: model(x).argmax(1), store, "val", 256, method.augmenter, device))


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
