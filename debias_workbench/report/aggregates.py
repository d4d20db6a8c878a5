"""The report's shared aggregations: tidy rows or the config in, tables keyed by model, grid cell or
run out. Below the sections (`report.sections.*`) and the context (`report.context`), which both
read them; nothing here writes to the document."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from debias_workbench.core.statistics import run_value

from .helpers import counted_values, too_few_column

#: the column of shape-bias decision counts of the seeds that counted too few to give a value
SHAPE_BIAS_TOO_FEW = too_few_column("shape_bias")


def shape_bias_table(rows: list[dict[str, Any]], labels: dict[str, str]) -> dict[str, dict[str, list[float]]]:
    """{model label: {"shape_bias": [shape bias per seed], SHAPE_BIAS_TOO_FEW: [decisions per seed]}}
    from the eval rows (`labels`: experiment -> label): a seed whose shape bias counts fewer than
    `MIN_IMAGES` decisions (Geirhos et al.: only the images classified as the shape or the texture
    class count) gives its count, not its value (`helpers.counted_values`)."""
    return counted_values(rows, "shape_bias", labels)


def grid_accuracies(rows: list[dict[str, Any]], grid: str) -> dict[tuple[str, str, str], list[float]]:
    """{(train variant, method key, test set): [accuracy per seed]} of a grid's eval rows."""
    out: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for r in sorted((r for r in rows if r.get("grid") == grid and r["metric"] == "accuracy"), key=lambda r: r["seed"]):
        out[(r["train_variant"], r["grid_method"], r["variant"])].append(run_value(r))
    return out
