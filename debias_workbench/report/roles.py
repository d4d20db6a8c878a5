"""The models a verdict compares, named by what they are, never by their display label.

A table's rows are keyed by the experiments' `label`s, which are display text the user may change;
a verdict asks for "the ERM model trained on ORIGINAL" (`Role`), and `role_labels` says which row
that is in this report. Renaming a label changes the words, never the verdicts
(tests/test_report_roles.py). The papers declare their roles (`Paper.roles`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from debias_workbench.papers import PAPERS


@dataclass(frozen=True)
class Role:
    """A model by its method and the variant it trains on (of the main evaluation dataset)."""

    method: str
    train_variant: str
    paper_name: str  #: what the papers call it: said where no experiment plays the role


def all_roles() -> dict[str, Role]:
    """{role: model} of every registered paper (`Paper.roles`), in the papers' order and each
    paper's row order: the order of the tables' rows (`helpers.model_order`). Two papers may declare one
    role only as the same model: otherwise one paper's verdict would compare the other's."""
    roles: dict[str, Role] = {}
    for name in PAPERS:
        for role, model in PAPERS[name].roles.items():
            if roles.setdefault(role, model) != model:
                raise ValueError(f"papers: role {role!r} of paper {name!r} is {model}, another's is {roles[role]}")
    return roles


def role_experiments(config: dict[str, Any], shown: Iterable[str]) -> dict[str, str]:
    """{role: experiment} for the roles some experiment of the table `shown` (its row labels) plays:
    the one with the role's method and train variant, the first in config order where several do
    (tests/test_report_roles.py holds every shipped config to one each)."""
    shown = set(shown)
    found: dict[str, str] = {}
    roles = all_roles()
    for name, exp in config["experiments"].items():
        if exp["label"] not in shown:
            continue
        for role, want in roles.items():
            if (exp["method"], exp.get("train_variant")) == (want.method, want.train_variant):
                found.setdefault(role, name)
    return found


def role_labels(config: dict[str, Any], shown: Iterable[str]) -> dict[str, str]:
    """{role: display label} of `role_experiments`; a role no shown experiment plays is absent, so a
    lookup `table.get(roles.get(role), {})` finds nothing and the verdict says the model is missing."""
    return {role: config["experiments"][name]["label"] for role, name in role_experiments(config, shown).items()}


def played(roles: dict[str, str], wanted: Iterable[str]) -> tuple[list[str], list[str]]:
    """(the labels of the `wanted` roles some experiment plays, in order; the papers' names of the others)."""
    wanted = list(wanted)
    return [roles[r] for r in wanted if r in roles], [all_roles()[r].paper_name for r in wanted if r not in roles]


def paper_name(label: str, roles: dict[str, str]) -> str:
    """What the papers call the model shown as `label`: its role's name (their tables' rows are
    looked up by it), or the label where it plays no role."""
    return next((all_roles()[role].paper_name for role, shown in roles.items() if shown == label), label)
