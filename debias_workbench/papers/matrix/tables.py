"""The cells of the methods x benchmarks table: each method's difference from its like-for-like baseline on
each benchmark's number, from the final evaluation rows of the config's `report: matrix` grids.

A benchmark is one grid's dataset at one of its train variants, judged by one number its family
declares (`DatasetFamily.benchmark_metrics`); a method is a key of the grids' `methods` (the same key in
two grids is the same row, and ERM's runs share one row whatever their key). Each row is compared with the
baseline of its own regime and network in its grid (`contrasts`: supervised rows with ERM of the same
network, initialisation and budget, self-supervised rows with plain SSL of the same recipe), a reference
row's cells show its mean: every other cell is the difference of the method's mean over seeds from its
baseline's, its 95 % interval and verdict (`core.statistics.difference`), "better" or "worse" in the direction
the number is better in, under the Benjamini-Hochberg correction across the table's compared cells and the
family's trade-off guard (`verdicts`). Before that, the benchmark's recipe must learn the task at all, decided
by ERM trained where the bias is balanced away, on a split the comparisons are not scored on
(`capability.bias_free_line`; a family without a bias-free variant: its ERM's `capability_check`,
`report.helpers.capability_line`): where it does not, or cannot be seen to, the benchmark cannot tell a working
method from a broken one and its cells read "not informative". Each run is scored at its last iterate, or
(`build_matrix(..., selection=PAPER)`) by its method's paper's rule against its baseline under the same rule
(`selection`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from debias_workbench.core.statistics import run_value
from debias_workbench.pipeline.datasets import family_name, get_family
from debias_workbench.pipeline.datasets.base import BenchmarkMetric, CapabilityCheck
from debias_workbench.report.context import accuracy_table
from debias_workbench.report.helpers import capability_line, mean_std
from debias_workbench.training.applicability import applicability
from debias_workbench.training.methods.spec import LAST

from .capability import bias_free_line
from .contrasts import Baseline, baselines, row_baselines
from .reference import is_reference, matrix_grids
from .selection import PAPER, Selection, for_metric, paper_selections, selected_rows
from .supervision import row_given
from .verdicts import Cell, corrected, provisional

#: the one table row of the reference runs, whatever their key in each grid
REFERENCE_ROW = "erm"


@dataclass(frozen=True)
class Benchmark:
    """One column: grid `grid`'s `dataset` (of `family`) trained on `train_variant`, judged by `metric`; its
    ERM's `capability` check (None: the family declares none) against `chance` (%)."""

    grid: str
    dataset: str
    family: str
    train_variant: str
    metric: BenchmarkMetric
    capability: CapabilityCheck | None = None
    chance: float = math.nan

    @property
    def title(self) -> str:
        arrow = "↑" if self.metric.higher_is_better else "↓"
        return f"{self.dataset} {self.train_variant}: {self.metric.title} {arrow}"


@dataclass(frozen=True)
class Matrix:
    """{row: label} in row order, the benchmarks in column order, {(row, column): cell}, per column
    (capable, the capability line's sentence), per row what it is compared with (`contrasts`) and what it is
    given beyond images and labels (`supervision`: the table's cell, and {family: in full}), and the
    `selection` its runs are scored by (`LAST`, or `PAPER`: each method's paper's rule)."""

    methods: dict[str, str]
    benchmarks: list[Benchmark]
    cells: dict[tuple[str, int], Cell]
    capable: dict[int, tuple[bool, str]]
    baselines: dict[str, str] = field(default_factory=dict)
    given: dict[str, str] = field(default_factory=dict)
    given_in_full: dict[str, dict[str, str]] = field(default_factory=dict)
    selection: str = LAST


def benchmarks(config: dict[str, Any], grids: dict[str, dict[str, Any]]) -> list[Benchmark]:
    """Every grid at every train variant by every number its family declares for it."""
    out = []
    for name, grid in grids.items():
        ds_cfg = config["datasets"][grid["dataset"]]
        family = get_family(family_name(ds_cfg))
        chance = 100.0 / family.class_count(ds_cfg)
        for variant in grid["train_variants"]:
            check = family.capability_check(ds_cfg, variant)
            for metric in family.benchmark_metrics(ds_cfg, variant):
                out.append(Benchmark(name, grid["dataset"], family.name, variant, metric, check, chance))
    return out


def seed_values(
    rows: list[dict[str, Any]],
    bench: Benchmark,
    metric: BenchmarkMetric | None = None,
    selection: Selection | None = None,
) -> dict[str, list[float]]:
    """{method key: [value per seed]} of the benchmark's number (or of `metric`, read the same way), from the
    grid's final eval rows (or the rows `selection` picks: `selection.selected_rows`)."""
    metric = metric or bench.metric
    own = selected_rows(rows, bench.grid, bench.train_variant, selection)
    if metric.metric == "accuracy":  # Mixed-Same minus Mixed-Rand as the report's context computes it
        table = accuracy_table(own, {r["experiment"]: r["grid_method"] for r in own})
        return {key: list(cols.get(metric.column, [])) for key, cols in table.items()}
    values: dict[str, list[float]] = {}
    for r in sorted(own, key=lambda r: r["seed"]):
        if r["metric"] == metric.metric and r["variant"] == metric.column:
            values.setdefault(r["grid_method"], []).append(run_value(r))
    return values


def capable(
    bench: Benchmark, grid: dict[str, Any], rows: list[dict[str, Any]], config: dict[str, Any]
) -> tuple[bool, str]:
    """(capable, sentence): does the benchmark's recipe learn the task at all? Decided by its bias-free reference
    (`capability.bias_free_line`), else by the benchmark's own ERM (its family's capability check)."""
    title = f"{bench.dataset} {bench.train_variant}"
    if bench.capability is None:
        return False, f"{title}: the dataset family declares no capability check, so its cells are not informative."
    if (reference := bias_free_line(config, bench, rows, bench.capability.task)) is not None:
        return reference
    keys = [key for key, spec in grid["methods"].items() if row_key(key, spec) == REFERENCE_ROW]
    values = next((v for key, v in seed_values(rows, bench, bench.capability.metric).items() if key in keys), [])
    check = bench.capability
    ok, line = capability_line("ERM", f"on {check.metric.title}", values, bench.chance, check.task)
    return ok, f"{title} (no bias-free variant: ERM trained on the biased data, on the unbiased test set): {line}"


def row_key(key: str, spec: dict[str, Any]) -> str:
    """The table row of grid method `key`: ERM's under whatever key a grid gives it (`REFERENCE_ROW`), else `key`."""
    return REFERENCE_ROW if is_reference(spec["method"]) else key


def method_rows(grids: dict[str, dict[str, Any]]) -> dict[str, tuple[str, str]]:
    """{row: (registered method, label)} over the grids: ERM's row first, then in order of first appearance."""
    rows: dict[str, tuple[str, str]] = {}
    for grid in grids.values():
        for key, spec in grid["methods"].items():
            rows.setdefault(row_key(key, spec), (spec["method"], spec["label"]))
    return dict(sorted(rows.items(), key=lambda item: item[0] != REFERENCE_ROW))


def column_cells(
    bench: Benchmark,
    grid: dict[str, Any],
    methods: dict[str, tuple[str, str]],
    rows: list[dict[str, Any]],
    ds_cfg: dict[str, Any],
    contrasts: dict[str, Baseline],
    informative: bool = True,
    selection: dict[str, Selection] | None = None,
) -> dict[str, Cell]:
    """{row: cell} of one benchmark, before the correction: a reference row's mean, each other row against its
    baseline in the grid (`contrasts`, by grid method), a method the family cannot serve (on the benchmark's train
    variant, as `ds_cfg`, its dataset's config, builds it) shown with the reason (`training.applicability`), one
    without rows "not run", every comparison "not informative" where the benchmark fails its capability check
    (not `informative`); each compared row by its `selection` (against its baseline by the same), if given,
    else at the last iterate."""
    rows_of = {key: row_key(key, spec) for key, spec in grid["methods"].items()}
    args_of = {rows_of[key]: spec.get("method_args", {}) for key, spec in grid["methods"].items()}
    by_selection: dict[tuple[Selection | None, BenchmarkMetric], dict[str, list[float]]] = {}

    def values_by(chosen: Selection | None, metric: BenchmarkMetric) -> dict[str, list[float]]:  # each read once
        if (chosen, metric) not in by_selection:
            picked = seed_values(rows, bench, metric, chosen).items()
            by_selection[(chosen, metric)] = {rows_of[key]: v for key, v in picked if key in rows_of and v}
        return by_selection[(chosen, metric)]

    values = values_by(None, bench.metric)
    cells = {}
    for row, (method, label) in methods.items():
        args = args_of.get(row)  # a row the grid does not train: the method at its defaults
        runs, reason = applicability(method, bench.family, ds_cfg, bench.train_variant, bench.dataset, args)
        chosen = for_metric((selection or {}).get(row), bench.metric)
        under = values_by(chosen, bench.metric)  # the row's and its baseline's by the row's selection
        if not runs:
            cells[row] = Cell("cannot run", f"cannot run: {reason}")
            continue
        if row not in values:
            cells[row] = Cell("not run", "not run")
            continue
        found = contrasts[next(key for key, r in rows_of.items() if r == row)]
        base = rows_of[found.key] if found.key is not None else None
        if found.reference:
            cells[row] = Cell("reference", f"{label} reference: {mean_std(under.get(row, values[row]))}")
        elif base is None:
            cells[row] = Cell("no baseline", f"{mean_std(values[row])}; {found.text}")
        elif base not in values:
            cells[row] = Cell("no reference", f"{mean_std(values[row])}; no run of its baseline {found.text} here")
        elif not informative:
            shown = mean_std(under.get(row, []))
            cells[row] = Cell("not informative", f"not informative ({shown}): the capability check fails")
        else:
            traded = bench.metric.trades_against
            pair = None
            if traded is not None:
                against = values_by(for_metric(chosen, traded), traded)  # at the judged number's own point
                pair = (against.get(row, []), against.get(base, []))
            cell = provisional(under.get(row, []), under.get(base, []), bench.metric, found.text, pair)
            cells[row] = replace(cell, note=chosen.note, rule=chosen.rule) if chosen else cell
    return cells


def build_matrix(config: dict[str, Any], rows: list[dict[str, Any]], selection: str = LAST) -> Matrix | None:
    """The table of the config's `report: matrix` grids, None where it has none; every run at its last iterate
    (`LAST`) or by its method's paper's rule (`PAPER`, `selection.paper_selections`)."""
    grids = matrix_grids(config)
    if not grids:
        return None
    methods = method_rows(grids)
    columns = benchmarks(config, grids)
    once: dict[tuple[str, str], tuple[bool, str]] = {}
    for bench in columns:  # a benchmark's numbers share its ERM's one check
        if (bench.grid, bench.train_variant) not in once:
            once[(bench.grid, bench.train_variant)] = capable(bench, grids[bench.grid], rows, config)
    checks = {i: once[(bench.grid, bench.train_variant)] for i, bench in enumerate(columns)}
    contrasts = {name: baselines(config, grid) for name, grid in grids.items()}
    cells = {}
    for i, bench in enumerate(columns):
        ds_cfg = config["datasets"][bench.dataset]
        rules = paper_selections(methods, bench.family, ds_cfg, bench.train_variant) if selection == PAPER else None
        found = column_cells(
            bench, grids[bench.grid], methods, rows, ds_cfg, contrasts[bench.grid], checks[i][0], rules
        )
        for key, cell in found.items():
            cells[(key, i)] = cell
    given, given_in_full = row_given(config, grids, row_key)
    return Matrix(
        {key: label for key, (_, label) in methods.items()},
        columns,
        corrected(cells),
        checks,
        row_baselines(config, grids, row_key),
        given,
        given_in_full,
        selection,
    )
