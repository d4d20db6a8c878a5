"""Which run each row of the methods x benchmarks table is compared with: the baseline of its own regime and
network, from the methods' declarations (`training.methods.spec.MethodSpec`), not from a list kept by hand.

A method declares its training `regime` (supervised, or self-supervised: a linear probe on a backbone trained
without labels), whether its runs are the regime's `reference` (ERM), and the arguments that are its
`treatment` (Ge et al.'s `negative` and `alpha`). A row's baseline is a run of the same grid, of the same
regime, that is a reference:

- a row of a method with a `treatment` (MoCo-v2 + patch negatives) is compared with a row of its
  `baseline_method` (itself by default) whose treatment arguments are at their defaults and whose other
  arguments are its own: plain MoCo-v2 of the same recipe, so that the difference is the negatives';
  such a plain row is itself a reference (its regime's, not judged against supervised ERM);
- any other row (ReBias, LfF, CLAD) is compared with its regime's reference (ERM).

Either way the two runs must also agree on the training settings that decide what a difference measures
(`SETTINGS`: the network, its initialisation and the training budget), as the grid resolves them for each run
(`workflow.config.expand_grids`, `workflow.slices.run_config`). Where no run of the grid agrees, the row has no
like-for-like baseline and its cells say so, naming what differs from the regime's nearest reference, rather
than compare a self-supervised from-scratch ResNet-50 with an ImageNet-pretrained supervised one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from debias_workbench.core.mapping import deep_merge
from debias_workbench.core.names import GRID_WEIGHTS, NETWORK_WIDTH_KEYS
from debias_workbench.training.methods import spec

#: {what: the resolved training keys that make it}: what a row and its baseline must share
SETTINGS = {
    "network": ("arch", "stem", *NETWORK_WIDTH_KEYS),
    "initialisation": ("pretrained",),
    "budget": ("epochs", "iterations", "batch_size"),
    "recipe": ("optimizer", "schedule", "augment", "normalize"),
}
#: what a cell says where its row has no baseline
NO_BASELINE = "no like-for-like baseline in this grid"


@dataclass(frozen=True)
class Baseline:
    """A grid method's baseline: `key`, the grid method it is compared with (None: it is a reference itself, or
    none matches), whether it is its regime's `reference`, and `text`, what the table says of it."""

    key: str | None
    reference: bool
    text: str


def run_training(config: dict[str, Any], grid: dict[str, Any], entry: dict[str, Any]) -> dict[str, Any]:
    """The training settings a grid method's runs train with: the config's `training`, then the grid's (its own
    weights only: `GRID_WEIGHTS`), then the method's own, as `expand_grids` and `run_config` merge them."""
    own = deep_merge(GRID_WEIGHTS, deep_merge(grid.get("training", {}), entry.get("training", {})))
    return deep_merge(config.get("training", {}), own)


def method_args(entry: dict[str, Any]) -> dict[str, Any]:
    """A grid method's resolved `method_args`: its method's defaults, then its own."""
    return {**spec(entry["method"]).defaults, **entry.get("method_args", {})}


def is_reference(entry: dict[str, Any]) -> bool:
    """Whether a grid method's rows are a reference of their regime: a method declared `reference` (ERM), or one
    with a `treatment` that is its own baseline method, every treatment argument at its default (plain MoCo-v2)."""
    declared = spec(entry["method"])
    if declared.reference:
        return True
    args = method_args(entry)
    at_default = all(args[name] == declared.defaults[name] for name in declared.treatment)
    return bool(declared.treatment) and declared.baseline_method is None and at_default


def _candidate(entry: dict[str, Any], other: dict[str, Any]) -> bool:
    """Whether grid method `other` is the kind of run `entry` is compared with (before the settings)."""
    declared, theirs = spec(entry["method"]), spec(other["method"])
    if theirs.regime != declared.regime or not is_reference(other):
        return False
    if not declared.treatment:
        return theirs.reference
    if other["method"] != (declared.baseline_method or entry["method"]):
        return False
    mine, their_args = method_args(entry), method_args(other)
    shared = (set(mine) | set(their_args)) - set(declared.treatment)
    return all(mine.get(name) == their_args.get(name) for name in shared)


def differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """The `SETTINGS` two resolved trainings differ in: "arch resnet50 vs small_cnn" and the like."""
    return [
        f"{key} {a.get(key)} vs {b.get(key)}" for keys in SETTINGS.values() for key in keys if a.get(key) != b.get(key)
    ]


def baseline(config: dict[str, Any], grid: dict[str, Any], key: str) -> Baseline:
    """The baseline of grid method `key` of `grid` (module docstring)."""
    methods = grid["methods"]
    entry = methods[key]
    if is_reference(entry):
        return Baseline(None, True, f"reference ({spec(entry['method']).regime})")
    mine = run_training(config, grid, entry)
    candidates = [other for other in methods if other != key and _candidate(entry, methods[other])]
    for other in candidates:
        if not differences(mine, run_training(config, grid, methods[other])):
            return Baseline(other, False, methods[other]["label"])
    if not candidates:
        return Baseline(None, False, f"{NO_BASELINE} (no {spec(entry['method']).regime} reference run)")
    nearest = candidates[0]
    diff = ", ".join(differences(mine, run_training(config, grid, methods[nearest])))
    return Baseline(None, False, f"{NO_BASELINE} ({methods[nearest]['label']}: {diff})")


def baselines(config: dict[str, Any], grid: dict[str, Any]) -> dict[str, Baseline]:
    """{grid method: its baseline} of every method of `grid`."""
    return {key: baseline(config, grid, key) for key in grid["methods"]}


def row_baselines(
    config: dict[str, Any], grids: dict[str, dict[str, Any]], rows_of: Callable[[str, dict[str, Any]], str]
) -> dict[str, str]:
    """{table row: what it is compared with}, over the `grids` it is in (`rows_of(key, entry)`: a grid method's
    table row); where grids differ, each text with its grids."""
    texts: dict[str, dict[str, list[str]]] = {}
    for name, grid in grids.items():
        for key, found in baselines(config, grid).items():
            texts.setdefault(rows_of(key, grid["methods"][key]), {}).setdefault(found.text, []).append(name)
    return {
        row: next(iter(by_text))
        if len(by_text) == 1
        else "; ".join(f"{t} ({', '.join(g)})" for t, g in by_text.items())
        for row, by_text in texts.items()
    }
