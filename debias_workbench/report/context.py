"""What every report section reads: the config, the tidy rows split by what they score, and the
tables aggregated from them once (`ReportContext`)."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from debias_workbench.core.statistics import RunValue, run_value
from debias_workbench.pipeline.datasets import counted_metrics, derived_metrics

from .aggregates import counted_table
from .helpers import by_label, experiment_labels, read_rows, sweep_only_experiments
from .roles import role_labels

Table = dict[str, dict[str, list[float]]]  # {model label: {column: [value per seed]}}


def accuracy_table(rows: list[dict[str, Any]], labels: dict[str, str]) -> Table:
    """{model label: {variant or derived metric: [value per seed]}} from eval rows, aggregated per
    experiment and shown under its label (`labels`: experiment -> label).

    Each registered family's derived metrics (`pipeline.datasets.derived_metrics`, e.g. IN-9's BG-GAP =
    acc(Mixed-Same) - acc(Mixed-Rand), Xiao et al. 2021) are computed per seed, then aggregated.
    """
    per_run: dict[tuple[str, int], dict[str, RunValue]] = defaultdict(dict)
    for r in rows:  # derived metrics are computed here alone, from the two accuracies (runs write no row of them)
        if r.get("kind") == "eval" and r["metric"] == "accuracy":
            per_run[(r["experiment"], r["seed"])][r["variant"]] = run_value(r)
    table: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    derived = derived_metrics()
    for (experiment, seed), accs in sorted(per_run.items()):
        for variant, value in accs.items():
            table[experiment][variant].append(value)
        for metric in derived:
            if metric.minuend in accs and metric.subtrahend in accs:
                table[experiment][metric.column].append(
                    _difference(accs[metric.minuend], accs[metric.subtrahend], seed)
                )
    return by_label(table, labels)


def _difference(first: RunValue, second: RunValue, seed: int) -> RunValue:
    """`first` - `second` of one run: its standard error from both (independent test sets), and per image where
    the two test sets hold the same images row for row (as Mixed-Same and Mixed-Rand hold the same foregrounds)."""
    aligned = (
        first.per_image is not None and second.per_image is not None and len(first.per_image) == len(second.per_image)
    )
    return RunValue(
        first - second,
        seed,
        math.hypot(first.se, second.se),
        first.n,
        first.per_image - second.per_image
        if first.per_image is not None and second.per_image is not None and aligned
        else None,
    )


@dataclass
class ReportContext:
    """The inputs of the report and the row sets and tables its sections share.

    `all_rows`: every tidy row, labelled; `rows`: those of the main evaluation dataset's runs
    (no grid run, no official-test-image row, no run scored on a dataset of its own);
    `table`: their accuracies (sweep runs included), `main`: without the sweep-only runs,
    `counted`: the counted metrics of `main`'s runs (each family's `counted_metrics`, e.g. IN-9's shape bias: the
    value per seed where it counts enough decisions, else their number: `helpers.counted_values`), `with_counted`:
    `main` plus those columns; `elsewhere` / `other_tables`: the rows and
    accuracies of the runs scored on another dataset (`eval_dataset`: ImageNet-100), by dataset."""

    config: dict[str, Any]
    out_dir: Path
    stores: dict[str, Path]
    quality_file: Path
    manifest_files: list[Path]
    saliency_arrays: Path | None
    labels: dict[str, str]
    all_rows: list[dict[str, Any]]
    rows: list[dict[str, Any]]
    official_table: Table
    elsewhere: dict[str, list[dict[str, Any]]]
    scored_elsewhere: frozenset[str]
    table: Table = field(default_factory=dict)
    main: Table = field(default_factory=dict)
    counted: Table = field(default_factory=dict)
    with_counted: Table = field(default_factory=dict)
    other_tables: dict[str, Table] = field(default_factory=dict)
    roles: dict[str, str] = field(default_factory=dict)  #: {role: label} of the verdicts' models (report.roles)

    @property
    def dataset(self) -> dict[str, Any]:
        """The main evaluation dataset's config section."""
        return self.config["datasets"][self.config["evaluation"]["dataset"]]


@dataclass(frozen=True)
class ReportInputs:
    """What a report is built from: its config slice (`workflow.report_slice.report_config`) and the files the
    workflow's report rule gives it (`workbench report`'s arguments)."""

    config: dict[str, Any]
    metric_files: list[Path]  #: the runs' and analyses' tidy JSON-lines rows
    quality_file: Path  #: the segmentation-quality rows
    manifest_files: list[Path]  #: the dataset stores' manifests (images in = out + skipped)
    stores: dict[str, Path]  #: {variant: store} of the evaluation dataset (the variant grid picture)
    saliency_arrays: Path | None = None  #: the saliency analysis' arrays, where a config runs it


def build_context(inputs: ReportInputs, out_dir: Path) -> ReportContext:
    """Every table the sections read, made once from the inputs' rows."""
    config = inputs.config
    all_rows = read_rows(inputs.metric_files)
    labels = experiment_labels(config)
    for r in all_rows:  # rows carry no labels: display names come from this report's config
        if "experiment" in r:
            r["label"] = labels.get(r["experiment"], r["experiment"])
    official = config["evaluation"].get("official_dataset")
    is_official = lambda r: official is not None and r.get("dataset") == official  # noqa: E731
    is_grid = lambda r: config["experiments"].get(r.get("experiment", ""), {}).get("grid")  # noqa: E731
    elsewhere: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in all_rows:
        if (
            r.get("kind") == "eval"
            and not is_grid(r)
            and r.get("dataset") not in (None, config["evaluation"]["dataset"], official)
        ):
            elsewhere[r["dataset"]].append(r)
    scored_elsewhere = frozenset(r["experiment"] for d_rows in elsewhere.values() for r in d_rows)
    rows = [
        r
        for r in all_rows
        if not is_grid(r)
        and not is_official(r)
        and not (r.get("kind") == "eval" and r.get("experiment") in scored_elsewhere)
    ]
    ctx = ReportContext(
        config=config,
        out_dir=out_dir,
        stores=inputs.stores,
        quality_file=inputs.quality_file,
        manifest_files=inputs.manifest_files,
        saliency_arrays=inputs.saliency_arrays,
        labels=labels,
        all_rows=all_rows,
        rows=rows,
        official_table=accuracy_table([r for r in all_rows if is_official(r)], labels),
        elsewhere=dict(sorted(elsewhere.items())),
        scored_elsewhere=scored_elsewhere,
    )
    ctx.table = accuracy_table(rows, labels)
    swept = {config["experiments"][e]["label"] for e in sweep_only_experiments(config)}  # in their own figures only
    ctx.main = {label: cols for label, cols in ctx.table.items() if label not in swept}
    ctx.counted = {
        label: cols for label, cols in counted_table(rows, labels, counted_metrics()).items() if label in ctx.main
    }
    ctx.with_counted = {label: {**cols, **ctx.counted.get(label, {})} for label, cols in ctx.main.items()}
    ctx.other_tables = {dataset: accuracy_table(d_rows, labels) for dataset, d_rows in ctx.elsewhere.items()}
    ctx.roles = role_labels(config, ctx.main)
    return ctx
