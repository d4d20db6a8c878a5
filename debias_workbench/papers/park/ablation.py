"""Park et al.'s Table 3 (the ablation) for grids with `report: park_ablation`: each row's switches
(the `method_args` it sets away from the full method's), validation-selected and oracle per ratio with
the paper's row of the same switches beside it; the capability line; each row against the full method;
and how each row trained (partners' bias-conflicting share, s(x^BN), Eq. 9's distance, IE, training
accuracy)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from debias_workbench.report.document import Document
from debias_workbench.report.helpers import mean_std
from debias_workbench.training.methods import spec as method_spec

from .grid_results import (
    PARK_METHOD,
    TEST,
    capability,
    not_judged,
    num_classes,
    percent,
    seeds_per_row,
    selected_and_oracle,
    versus,
)

#: Park et al.'s Table 3 columns: the method_args each ablation row switches, and how the table shows their values
SWITCHES = {
    "guide": "L_guide",
    "bn_loss": "L_BN",
    "partner_source": "x^BN from",
    "score_weight": "s(x^BN) as weight",
    "guide_sim": "Eq. 9 reading",
}


SWITCH_VALUES = {
    True: "✓",
    False: "✗",
    "D": "D",
    "D_cand": "D^BN_cand",
    "D_BN": "D^BN",
    "target_shares": "target, shares",
    "target_raw": "target, raw",
    "through_both": "through both",
}


#: the training statistics of `_training_health`, in its columns' order
HEALTH = ("partner_conflicting_fraction", "partner_weight", "guide_distance", "ie_mean", "train_acc")


def switches(config: dict[str, Any], grid: str, key: str) -> dict[str, Any]:
    """The Table 3 switches a Park et al. method of `grid` sets away from their defaults ({} = the full method)."""
    defaults = method_spec(PARK_METHOD).defaults
    args = next(
        exp.get("method_args", {})
        for exp in config["experiments"].values()
        if exp.get("grid") == grid and exp.get("grid_method") == key
    )
    return {k: args[k] for k in SWITCHES if k in args and args[k] != defaults[k]}


def table3(
    doc: Document,
    config: dict[str, Any],
    name: str,
    grid: dict[str, Any],
    rows: list[dict[str, Any]],
    quoted: dict[str, Any],
) -> None:
    """Park et al. Table 3: each Park et al. row of the grid by its switches, validation-selected and
    oracle per ratio, the paper's row with the same switches beside it; the capability line; every
    row against the full method; how each row trained."""
    metric = grid["model_selection"]["metric"]
    cells = selected_and_oracle(rows, config, name, metric)
    variants = sorted(grid["train_variants"], key=percent)
    park = {key: switches(config, name, key) for key, m in grid["methods"].items() if m["method"] == PARK_METHOD}
    doc.heading(
        f"Park et al. (CVPR 2024), Table 3 (ablation) – {name}: {metric.replace('_', ' ')} (%) on the {TEST} "
        f"test set of {grid['dataset']}"
    )
    doc.para(
        f"Mean ± sample std over {seeds_per_row(config, name)}. Validation-selected and best test (oracle) as in "
        "Table 1. The paper's columns are its Table 3 (best test accuracy at 1 %, 5 seeds) on its own "
        "datasets, for the row with the same switches; only the pattern across rows compares. Eq. 9 reading: "
        "g(z) a fixed target, compared on channel shares (target, shares: bounded) or on the raw GAP features "
        "(target, raw: the literal loss), or the gradient through both sides and IE (through both)."
    )
    _switch_table(doc, grid, park, cells, variants, quoted)
    others = [key for key in grid["methods"] if key not in park]
    if others:
        doc.table(
            ["Reference row", *_ratio_columns(variants)],
            [[grid["methods"][key]["label"], *_ratio_cells(cells, key, variants)] for key in others],
        )
    conflicting = selected_and_oracle(rows, config, name, "conflicting_accuracy")
    chance = 100.0 / num_classes(config, grid["dataset"])
    _against_full(doc, grid, park, cells, variants, capability(doc, grid, conflicting, variants, chance))
    _training_health(doc, config, name, grid, rows, list(park), variants)


def _ratio_columns(variants: list[str]) -> list[str]:
    """The headers of a row's cells: validation-selected then oracle, each per ratio."""
    return [f"{percent(v):g} % ({kind})" for kind in ("selected", "oracle") for v in variants]


def _ratio_cells(cells: dict, key: str, variants: list[str]) -> list[str]:
    """Row `key`'s cells (mean ± std over seeds) under `_ratio_columns`."""
    return [mean_std(cells.get((v, key), {}).get(kind, [])) for kind in ("selected", "oracle") for v in variants]


def _switch_table(
    doc: Document,
    grid: dict[str, Any],
    park: dict[str, dict[str, Any]],
    cells: dict,
    variants: list[str],
    quoted: dict[str, Any],
) -> None:
    """Each Park et al. row (`park`: its switches away from the defaults) with every switch's value, its cells,
    and the paper's row with the same switches (numbers.yaml `park_table3`; – where the paper has none)."""
    defaults = method_spec(PARK_METHOD).defaults
    paper_rows = {tuple(sorted(r["switches"].items())): r["values"] for r in quoted["rows"]}
    header = ["Row", *SWITCHES.values(), *_ratio_columns(variants), *[f"paper {c}" for c in quoted["columns"]]]
    table = []
    for key, changed in park.items():
        values = {**{k: defaults[k] for k in SWITCHES}, **changed}
        table.append(
            [
                grid["methods"][key]["label"],
                *[SWITCH_VALUES[values[k]] for k in SWITCHES],
                *_ratio_cells(cells, key, variants),
                *paper_rows.get(tuple(sorted(changed.items())), ["–"] * len(quoted["columns"])),
            ]
        )
    doc.table(header, table)


def _against_full(
    doc: Document,
    grid: dict[str, Any],
    park: dict[str, dict[str, Any]],
    cells: dict,
    variants: list[str],
    judged: tuple[bool, str],
) -> None:
    """Every Park et al. row against the full method (the row with no switch changed), validation-selected at
    each ratio, where the capability check (`judged`: capable, why not) lets the benchmark judge."""
    full = next((key for key, changed in park.items() if not changed), None)
    capable, reason = judged
    if capable and full is not None:
        lines = [
            f"{grid['methods'][key]['label']} vs the full method: "
            + "; ".join(f"{percent(v):g} %: {versus(doc, grid, cells, v, key, full)}" for v in variants)
            for key in park
            if key != full
        ]
        doc.para("Each row against the full method (validation-selected): " + ". ".join(lines) + ".")
    elif full is None:
        doc.para("No row with every switch at its default (the full method): no comparison.")
    else:
        not_judged(doc, grid, [(key, full) for key in park if key != full], reason)
        doc.para("Which components help here? Not informative.")


def _training_health(
    doc: Document,
    config: dict[str, Any],
    name: str,
    grid: dict[str, Any],
    rows: list[dict[str, Any]],
    keys: list[str],
    variants: list[str],
) -> None:
    """Per row and ratio: the share of bias-conflicting partners x^BN over the guided epochs, their mean
    weight s(x^BN) and Eq. 9's distance (without that weight) in the first and the last guided epoch,
    the mean IE weight and the training accuracy of the last epoch (mean over seeds): what tells a
    reading of Eq. 9 that diverges, or that cancels its own guidance (IE -> 1), from one that does
    neither."""
    per = _health_series(config, name, rows, keys)
    if not per:
        return
    doc.para(
        "How each row trained (mean over seeds): the share of bias-conflicting samples among the partners x^BN "
        "(from the true bias labels, never used in training); their weight s(x^BN) (1 without the weight) and "
        "Eq. 9's "
        "L1 distance (without that weight; bounded by 2 for the shares reading) in the first and the last guided "
        "epoch; the mean IE weight and the training accuracy (%) of the last epoch (the training set is mostly "
        "bias-aligned, so a model that leaves the bias behind fits less of it)."
    )
    doc.table(
        [
            "Row",
            *[
                f"{percent(v):g} %: {c}"
                for v in variants
                for c in ("x^BN BC (%)", "s(x^BN)", "Eq. 9 distance", "IE (end)", "train acc")
            ],
        ],
        [[grid["methods"][key]["label"], *[c for v in variants for c in _health_cells(per, key, v)]] for key in keys],
    )


#: {(grid method, train variant, `HEALTH` statistic): {epoch: [value per seed]}}
HealthSeries = dict[tuple[str, str, str], dict[int, list[float]]]


def _health_series(config: dict[str, Any], name: str, rows: list[dict[str, Any]], keys: list[str]) -> HealthSeries:
    """The `HEALTH` training statistics of the grid `name`'s rows `keys`, per epoch."""
    per: HealthSeries = defaultdict(lambda: defaultdict(list))
    for r in rows:
        exp = config["experiments"].get(r.get("experiment", ""), {})
        if (
            r.get("kind") == "train"
            and exp.get("grid") == name
            and exp.get("grid_method") in keys
            and r["metric"] in HEALTH
        ):
            per[(exp["grid_method"], exp["train_variant"], r["metric"])][r["epoch"]].append(r["value"])
    return per


def _health_cells(per: HealthSeries, key: str, variant: str) -> list[str]:
    """Row `key`'s health cells at `variant`, in `HEALTH`'s order (– where a statistic was not logged)."""
    bc, weight, sim, ie, acc = (per.get((key, variant, m), {}) for m in HEALTH)
    share = f"{100 * np.mean([v for vals in bc.values() for v in vals]):.0f}" if bc else "–"
    return [
        share,
        _first_last(weight, ".2f"),
        _first_last(sim, ".3g"),
        f"{np.mean(ie[max(ie)]):.4f}" if ie else "–",
        f"{100 * np.mean(acc[max(acc)]):.1f}" if acc else "–",
    ]


def _first_last(by_epoch: dict[int, list[float]], fmt: str) -> str:
    """ "first → last": the mean over seeds in the first and the last logged epoch (– without any)."""
    if not by_epoch:
        return "–"
    return f"{np.mean(by_epoch[min(by_epoch)]):{fmt}} → {np.mean(by_epoch[max(by_epoch)]):{fmt}}"
