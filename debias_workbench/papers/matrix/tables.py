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
family's trade-off guard (`verdicts`). Before that, each benchmark's ERM must learn the task at all (the family's
`capability_check`, `report.helpers.capability_line`): where it does not, or cannot be seen to, the benchmark
cannot tell a working method from a broken one and its cells read "not informative".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from debias_workbench.core.statistics import run_value
from debias_workbench.pipeline.datasets import family_name, get_family
from debias_workbench.pipeline.datasets.base import BenchmarkMetric, CapabilityCheck
from debias_workbench.report.context import accuracy_table
from debias_workbench.report.helpers import capability_line, mean_std
from debias_workbench.training.applicability import applicability

from .contrasts import Baseline, baselines, row_baselines
from .supervision import row_given
from .verdicts import Cell, corrected, provisional

#: the grid report kind of the table's grids (`workflow.py`)
KIND = "matrix"
#: the registered methods whose run is a benchmark's reference (ReBias's Vanilla is ERM on F)
REFERENCE_METHODS = ("erm", "vanilla")
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
    (capable, the capability line's sentence), and per row what it is compared with (`contrasts`), what it is
    given beyond images and labels (`supervision`: the table's cell, and {family: in full})."""

    methods: dict[str, str]
    benchmarks: list[Benchmark]
    cells: dict[tuple[str, int], Cell]
    capable: dict[int, tuple[bool, str]]
    baselines: dict[str, str] = field(default_factory=dict)
    given: dict[str, str] = field(default_factory=dict)
    given_in_full: dict[str, dict[str, str]] = field(default_factory=dict)


def matrix_grids(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The config's grids the table reads (`report: matrix`), in config order."""
    return {name: grid for name, grid in config.get("grids", {}).items() if grid.get("report") == KIND}


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
    rows: list[dict[str, Any]], bench: Benchmark, metric: BenchmarkMetric | None = None
) -> dict[str, list[float]]:
    """{method key: [value per seed]} of the benchmark's number (or of `metric`, read the same way), from the
    grid's final eval rows."""
    metric = metric or bench.metric
    own = [
        r
        for r in rows
        if r.get("kind") == "eval" and r.get("grid") == bench.grid and r.get("train_variant") == bench.train_variant
    ]
    if metric.metric == "accuracy":  # Mixed-Same minus Mixed-Rand as the report's context computes it
        table = accuracy_table(own, {r["experiment"]: r["grid_method"] for r in own})
        return {key: list(cols.get(metric.column, [])) for key, cols in table.items()}
    values: dict[str, list[float]] = {}
    for r in sorted(own, key=lambda r: r["seed"]):
        if r["metric"] == metric.metric and r["variant"] == metric.column:
            values.setdefault(r["grid_method"], []).append(run_value(r))
    return values


def capable(bench: Benchmark, grid: dict[str, Any], rows: list[dict[str, Any]]) -> tuple[bool, str]:
    """(capable, sentence): does the benchmark's ERM learn the task at all (its family's capability check)?"""
    title = f"{bench.dataset} {bench.train_variant}"
    if bench.capability is None:
        return False, f"{title}: the dataset family declares no capability check, so its cells are not informative."
    keys = [key for key, spec in grid["methods"].items() if row_key(key, spec) == REFERENCE_ROW]
    values = next((v for key, v in seed_values(rows, bench, bench.capability.metric).items() if key in keys), [])
    check = bench.capability
    ok, line = capability_line("ERM", f"on {check.metric.title}", values, bench.chance, check.task)
    return ok, f"{title}: {line}"


def row_key(key: str, spec: dict[str, Any]) -> str:
    """The table row of grid method `key`: ERM's under whatever key a grid gives it (`REFERENCE_ROW`), else `key`."""
    return REFERENCE_ROW if spec["method"] in REFERENCE_METHODS else key


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
) -> dict[str, Cell]:
    """{row: cell} of one benchmark, before the correction: a reference row's mean, each other row against its
    baseline in the grid (`contrasts`, by grid method), a method the family cannot serve (on the benchmark's train
    variant, as `ds_cfg`, its dataset's config, builds it) shown with the reason (`training.applicability`), one
    without rows "not run", every comparison "not informative" where the benchmark's ERM fails its capability
    check (not `informative`)."""
    rows_of = {key: row_key(key, spec) for key, spec in grid["methods"].items()}
    values = _row_values(rows, bench, rows_of, bench.metric)
    traded = _row_values(rows, bench, rows_of, bench.metric.trades_against) if bench.metric.trades_against else {}
    cells = {}
    for row, (method, label) in methods.items():
        runs, reason = applicability(method, bench.family, ds_cfg, bench.train_variant, bench.dataset)
        if not runs:
            cells[row] = Cell("cannot run", f"cannot run: {reason}")
            continue
        if row not in values:
            cells[row] = Cell("not run", "not run")
            continue
        found = contrasts[next(key for key, r in rows_of.items() if r == row)]
        base = rows_of[found.key] if found.key is not None else None
        if found.reference:
            cells[row] = Cell("reference", f"{label} reference: {mean_std(values[row])}")
        elif base is None:
            cells[row] = Cell("no baseline", f"{mean_std(values[row])}; {found.text}")
        elif base not in values:
            cells[row] = Cell("no reference", f"{mean_std(values[row])}; no run of its baseline {found.text} here")
        elif not informative:
            cells[row] = Cell(
                "not informative", f"not informative ({mean_std(values[row])}): ERM fails the capability check"
            )
        else:
            pair = (traded.get(row, []), traded.get(base, [])) if bench.metric.trades_against else None
            cells[row] = provisional(values[row], values[base], bench.metric, found.text, pair)
    return cells


def _row_values(
    rows: list[dict[str, Any]], bench: Benchmark, rows_of: dict[str, str], metric: BenchmarkMetric
) -> dict[str, list[float]]:
    """{table row: [value per seed]} of `metric` on the benchmark (`seed_values`), the rows with values only."""
    return {rows_of[key]: v for key, v in seed_values(rows, bench, metric).items() if key in rows_of and v}


def build_matrix(config: dict[str, Any], rows: list[dict[str, Any]]) -> Matrix | None:
    """The table of the config's `report: matrix` grids, None where it has none."""
    grids = matrix_grids(config)
    if not grids:
        return None
    methods = method_rows(grids)
    columns = benchmarks(config, grids)
    once: dict[tuple[str, str], tuple[bool, str]] = {}
    for bench in columns:  # a benchmark's numbers share its ERM's one check
        if (bench.grid, bench.train_variant) not in once:
            once[(bench.grid, bench.train_variant)] = capable(bench, grids[bench.grid], rows)
    checks = {i: once[(bench.grid, bench.train_variant)] for i, bench in enumerate(columns)}
    contrasts = {name: baselines(config, grid) for name, grid in grids.items()}
    cells = {
        (key, i): cell
        for i, bench in enumerate(columns)
        for key, cell in column_cells(
            bench,
            grids[bench.grid],
            methods,
            rows,
            config["datasets"][bench.dataset],
            contrasts[bench.grid],
            checks[i][0],
        ).items()
    }
    given, given_in_full = row_given(config, grids, row_key)
    return Matrix(
        {key: label for key, (_, label) in methods.items()},
        columns,
        corrected(cells),
        checks,
        row_baselines(config, grids, row_key),
        given,
        given_in_full,
    )
