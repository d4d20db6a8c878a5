"""The report's shared aggregations: tidy rows or the config in, tables keyed by model, grid cell or
run out. Below the sections (`report.sections.*`) and the context (`report.context`), which both
read them; nothing here writes to the document."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from debias_workbench.core.statistics import run_value

from .helpers import counted_values


def counted_table(
    rows: list[dict[str, Any]], labels: dict[str, str], metrics: tuple[str, ...]
) -> dict[str, dict[str, list[float]]]:
    """{model label: {metric: [value per seed], too_few_column(metric): [decisions per seed]}} of each of `metrics`,
    metrics whose value per run rests on a count of decisions (`DatasetFamily.counted_metrics`; Geirhos et al.'s
    shape bias counts only the images classified as the shape or the texture class), from the eval rows
    (`labels`: experiment -> label): a seed that counts fewer than `MIN_IMAGES` gives its count, not its value
    (`helpers.counted_values`)."""
    out: dict[str, dict[str, list[float]]] = defaultdict(dict)
    for metric in metrics:
        for label, cols in counted_values(rows, metric, labels).items():
            out[label].update(cols)
    return dict(out)


def grid_accuracies(rows: list[dict[str, Any]], grid: str) -> dict[tuple[str, str, str], list[float]]:
    """{(train variant, method key, test set): [accuracy per seed]} of a grid's eval rows."""
    out: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for r in sorted((r for r in rows if r.get("grid") == grid and r["metric"] == "accuracy"), key=lambda r: r["seed"]):
        out[(r["train_variant"], r["grid_method"], r["variant"])].append(run_value(r))
    return out
