"""A paper config's protocol: what the paper did, setting by setting, against what this config runs.

A paper config declares under `protocols.<paper>` every setting that moves a number (data and its
geometry, architecture, initial weights, optimiser, schedule, run length, batch, augmentation,
normalisation, method hyper-parameters, evaluation and model selection): the paper's value, its
source (a section of the paper or a file of the authors' code) and, where this config runs
otherwise, the `deviation` with its reason. Each setting names a key of the run config of the
`runs` it applies to (`workflow.slices.run_config`: the training section as the run resolves
it, its method's arguments with their defaults, its dataset section), with `config:` a key of
the resolved config itself, or with `code:` one of `code_rules()`: what the workbench's code does
where no setting chooses, so that a fixed rule that differs from the paper's (or that the paper
does not state) is declared as a row like any setting, not only in a note.

`check` lists what the protocol does not account for: a setting whose value differs from the
paper's without a declared deviation, a deviation declared where the values agree (stale), and
any training setting or method argument of a listed run that no setting covers and that is not
declared as `not_compared` with its reason, and any `code:` rule of a listed run's method or dataset
family (`run_code_rules`) that no setting names. A changed default can therefore not drift away from
the paper silently: a test resolves each paper config and fails on any of them. `rows` gives the
report its table: setting / paper / this run / source or reason.

No difference lives only in a note: a protocol's `notes` are either context (a plain string: what
the paper leaves open and how it is read here, where the user's files go) or `{text, rows}`, the
explanation of the named settings rows, each of which declares a `deviation`. `check` also fails
on a note naming a missing row or one without a deviation, and on a context note worded as a
difference (`DIFFERENCE_WORDING`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from debias_workbench.pipeline.datasets import FAMILIES, family_name
from debias_workbench.training.methods import REGISTRY as METHODS
from debias_workbench.training.methods import spec as method_spec

from . import paper_hooks
from .config import grid_experiment
from .slices import run_config
from .user_paths import path_keys, unread_keys

#: run-config sections whose every leaf a protocol accounts for (in `dataset_config`, the keys the
#: dataset reads: not the user's file paths, not a section `x-read-when` leaves unread, not storage)
COVERED_SECTIONS = ("training", "method_args", "dataset_config")
#: dataset-section keys (last part) of how a store is written or its work batched, which move no number
STORAGE_KEYS = ("chunk_images", "block_images", "image_codec", "batch_images", "timeout_s", "family")
#: run-config keys of how a run executes, which move no number of a paper's beyond float noise:
#: accounted for in every protocol (with the reason) so that no protocol repeats them
EXECUTION_SETTINGS = {
    "training.deterministic": "CUDA's choice of kernels: deterministic ones (run-to-run equality) or "
    "cudnn.benchmark's fastest"
}
#: the `code:` keys of the shared code: rules fixed in it that can move a paper's numbers, each with where it is
#: implemented (a change there must change its value here, and so meet the protocols that name it); a method's
#: own rules are declared in its spec (`code_rules`), a dataset family's in its class (`code_rules`, and
#: `conditional_code_rules` for those of some of its variants or settings only), a paper's in its `workflow.py`
#: (`CODE_RULES`, `workflow.paper_hooks.code_rules`); `code_rules()` collects all
CODE_RULES = {
    # training/evaluation.py score_run: a test set that holds some of the classes (ImageNet-R) is scored
    # by the argmax over every class of the model
    "partial_class_scoring": "argmax over all classes",
    # training/augment.py Augmenter.draw of square images (the SSL views too): RandomResizedCrop's scale and aspect
    # drawn once
    "random_resized_crop": "one draw, the window clamped to the image",
    # training/evaluation.py score_run: a run is scored with its trained weights (`load_trained`: after its last
    # step); a grid's `model_selection` also scores it along the way, for the best-val and best-test rows
    # (report/model_selection.py)
    "scored_checkpoint": "the last iterate",
}
#: the `code:` rules that hold for every run, whatever its method and dataset: each protocol names them
EVERY_RUN_RULES = ("scored_checkpoint",)
#: wording of a difference from the paper or the authors' code (lower case, regular expressions): a
#: note that uses it must name the settings rows that declare the difference (`note_problems`)
DIFFERENCE_WORDING = (
    r"where the (authors|paper)",
    r"instead of",
    r"rather than",
    r"differ",
    r"unlike",
    r"deviat",
    r"left out",
    r"\bhere\b[^.]*\bthe authors'",
)
#: keys naming a file the user places anywhere: compared by the file's name (torchvision's names carry
#: the weights' checksum prefix, resnet50-0676ba61.pth)
FILE_KEYS = ("training.pretrained",)


@dataclass(frozen=True)
class Row:
    """One line of a protocol table."""

    setting: str
    key: str
    paper: Any
    this_run: Any
    source: str
    deviation: str | None

    @property
    def differs(self) -> bool:
        return not same_value(self.paper, self.this_run)


def same_value(a: Any, b: Any) -> bool:
    """Equal as settings: numbers within 1e-9 relative, lists element by element, else ==."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    return a == b


def run_name(config: dict[str, Any], run: str) -> str:
    """An experiment's name, or `<grid>/<method>`: that grid method's run on the grid's first train variant."""
    if "/" in run:
        grid, method = run.split("/", 1)
        return grid_experiment(grid, method, config["grids"][grid]["train_variants"][0])
    return run


def _lookup(node: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            raise KeyError(dotted)
        node = node[part]
    return node


@cache
def code_rules() -> dict[str, Any]:
    """Every `code:` rule: `CODE_RULES`, each registered method's (`code_rules` in its spec), each dataset
    family's (`DatasetFamily.code_rules`, `conditional_code_rules`) and each paper's (`paper_hooks.code_rules`);
    a rule declared twice has one value."""
    found = dict(CODE_RULES)
    declared = [(f"method {m}", method_spec(m).code_rules) for m in METHODS]
    declared += [
        (f"dataset family {f}", {**family.code_rules, **family.conditional_code_rules})
        for f, family in FAMILIES.items()
    ]
    declared += [(f"paper {paper}", rules) for paper, rules in paper_hooks.code_rules().items()]
    for owner, rules in declared:
        for rule, rule_value in rules.items():
            if found.setdefault(rule, rule_value) != rule_value:
                raise ValueError(f"code rule {rule!r} of {owner} is {rule_value!r}, elsewhere {found[rule]!r}")
    return found


def value(config: dict[str, Any], run: str | None, key: str) -> Any:
    """The value of `key` for `run` (its run config, seed of the config's first), of the config
    (`config:`) or of the code (`code:`)."""
    if key.startswith("config:"):
        return _lookup(config, key.removeprefix("config:"))
    if key.startswith("code:"):
        return _lookup(code_rules(), key.removeprefix("code:"))
    if run is None:
        raise ValueError(f"{key!r} is a run's value: name the run")
    found = _lookup(run_config(config, run_name(config, run), config["seeds"][0]), key)
    return Path(found).name if key in FILE_KEYS and isinstance(found, str) else found


def rows(config: dict[str, Any], paper: str) -> list[Row]:
    """The protocol table of `paper`: one row per setting, the value of its first run (`check`
    holds the others to the same value)."""
    out = []
    for s in config["protocols"][paper]["settings"]:
        runs = s.get("runs") or [None]
        out.append(
            Row(s["setting"], s["key"], s["paper"], value(config, runs[0], s["key"]), s["source"], s.get("deviation"))
        )
    return out


def _leaves(node: Any, prefix: str) -> list[str]:
    if isinstance(node, dict) and node:
        return [leaf for k, v in node.items() for leaf in _leaves(v, f"{prefix}.{k}")]
    return [prefix]


def check(config: dict[str, Any], paper: str) -> list[str]:
    """Everything protocol `paper` leaves unaccounted for (module docstring), each naming its key."""
    protocol = config["protocols"][paper]
    where = f"protocols.{paper}"
    problems: list[str] = []
    covered: dict[str, set[str]] = {run: set() for run in protocol.get("runs", [])}
    for i, s in enumerate(protocol["settings"]):
        here = f"{where}.settings[{i}] ({s['setting']}, {s['key']})"
        for run in s.get("runs") or [None]:
            if run is not None and run not in covered:
                problems.append(f"{here}: run {run!r} is not in {where}.runs")
                continue
            try:
                got = value(config, run, s["key"])
            except KeyError:
                problems.append(f"{here}: {run or 'the config'} has no key {s['key']}")
                continue
            if run is not None:
                covered[run].add(s["key"])
            differs = not same_value(s["paper"], got)
            if differs and not s.get("deviation"):
                problems.append(
                    f"{here}: {run or 'the config'} runs {got!r} where the paper has {s['paper']!r} "
                    f"({s['source']}); follow the paper or declare a `deviation` with its reason"
                )
            elif not differs and s.get("deviation"):
                problems.append(
                    f"{here}: declares a deviation but {run or 'the config'} runs the paper's value "
                    f"{got!r}; remove the deviation"
                )
    skipped = [n["key"] for n in protocol.get("not_compared", [])] + list(EXECUTION_SETTINGS)
    problems += _unnamed_code_rules(config, protocol, where, skipped)
    unsettings = {*path_keys(config), *unread_keys(config)}  # one walk of the config for every run
    for run, keys in covered.items():
        rc: Mapping[str, object] = run_config(config, run_name(config, run), config["seeds"][0])
        keys = keys | _not_dataset_settings(config, str(rc["dataset"]), unsettings)
        for section in COVERED_SECTIONS:
            for leaf in _leaves(rc[section], section):
                if leaf == section:  # an empty section (a method without arguments)
                    continue
                if not any(leaf == k or leaf.startswith(k + ".") for k in (*keys, *skipped)):
                    problems.append(
                        f"{where}: {leaf} of run {run!r} ({_lookup(rc, leaf)!r}) is in no setting; add "
                        f"it with the paper's value and source, or to not_compared with the reason"
                    )
    return problems + note_problems(protocol, where)


def run_code_rules(config: dict[str, Any], run: str) -> list[str]:
    """The `code:` keys that hold for `run`: `EVERY_RUN_RULES` and the rules of its method's spec and of its dataset's
    family (each fixed in code that the run executes, so its protocol names each of them)."""
    exp = config["experiments"][run_name(config, run)]
    family = FAMILIES[family_name(config["datasets"][exp["dataset"]])]
    rules = (*EVERY_RUN_RULES, *method_spec(exp["method"]).code_rules, *family.code_rules)
    return [f"code:{rule}" for rule in rules]


def _unnamed_code_rules(config: dict[str, Any], protocol: dict[str, Any], where: str, skipped: list[str]) -> list[str]:
    """A problem for each `code:` rule of a listed run (`run_code_rules`) that no setting names for that run."""
    named = {(run, s["key"]) for s in protocol["settings"] for run in s.get("runs") or protocol.get("runs", [])}
    return [
        f"{where}: {rule} ({value(config, run, rule)!r}) holds for run {run!r} but no setting names it; add it with "
        "the paper's value and source, or to not_compared with the reason"
        for run in protocol.get("runs", [])
        for rule in run_code_rules(config, run)
        if (run, rule) not in named and rule not in skipped
    ]


def _not_dataset_settings(config: dict[str, Any], dataset: str, unsettings: set[str]) -> set[str]:
    """`dataset_config.<key>` of `dataset`'s section that are no settings: the user's file paths
    and the keys `x-read-when` leaves unread (`unsettings`, dotted keys of the config), and
    `STORAGE_KEYS`."""
    prefix = f"datasets.{dataset}."
    section = config["datasets"][dataset]
    out = {"dataset_config." + k.removeprefix(prefix) for k in unsettings if k.startswith(prefix)}
    return out | {leaf for leaf in _leaves(section, "dataset_config") if leaf.rsplit(".", 1)[-1] in STORAGE_KEYS}


def note_parts(note: str | dict[str, Any]) -> tuple[str, list[str]]:
    """A note's text and the settings rows whose deviations it explains (none: a context note, a
    plain string)."""
    return (note, []) if isinstance(note, str) else (note["text"], list(note["rows"]))


def note_problems(protocol: dict[str, Any], where: str) -> list[str]:
    """How the notes of `protocol` could hold a difference from the paper that its table does not:
    a note naming a row that no setting has or that declares no deviation, and a context note
    (naming no row) worded as a difference (`DIFFERENCE_WORDING`). A difference is a settings row
    with its `deviation`; a note may only explain it, naming the row."""
    by_name: dict[str, list[dict[str, Any]]] = {}
    for s in protocol["settings"]:
        by_name.setdefault(s["setting"], []).append(s)
    problems = []
    for i, note in enumerate(protocol.get("notes", [])):
        text, named = note_parts(note)
        here = f"{where}.notes[{i}] ({text[:50]!r}...)"
        for name in named:
            if name not in by_name:
                problems.append(f"{here}: names row {name!r}, which no setting of {where} has")
            elif not all(s.get("deviation") for s in by_name[name]):
                problems.append(f"{here}: names row {name!r}, which declares no deviation; name only rows that do")
        wording = [w for w in DIFFERENCE_WORDING if re.search(w, text.lower())]
        if wording and not named:
            problems.append(
                f"{here}: is worded as a difference from the paper ({wording[0]!r}) but names no row; "
                "declare the difference as a settings row with its `deviation` and name it in the "
                "note's `rows`, or word the note as context"
            )
    return problems


def report_protocols(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """{paper: {title, section, rows, notes}} for the report (rows as plain dicts, notes as {text, rows})."""
    out = {}
    for paper, protocol in config.get("protocols", {}).items():
        notes = [dict(zip(("text", "rows"), note_parts(n))) for n in protocol.get("notes", [])]
        out[paper] = {
            "title": protocol["title"],
            "section": protocol["section"],
            "notes": notes,
            "rows": [
                {
                    "setting": r.setting,
                    "paper": r.paper,
                    "this_run": r.this_run,
                    "source": r.source,
                    "deviation": r.deviation,
                }
                for r in rows(config, paper)
            ],
        }
    return out
