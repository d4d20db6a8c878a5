"""Helpers shared by the report's sections: reading tidy rows, aggregating over seeds, figures."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from pipeline.store import atomic_path  # noqa: E402


def read_rows(paths: list[Path]) -> list[dict[str, Any]]:
    rows = []
    for path in paths:
        rows += [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    return rows


def mean_std(values: list[float], digits: int = 1) -> str:
    if not values:
        return "–"
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{np.mean(values):.{digits}f} ± {np.std(values, ddof=1):.{digits}f}"


def metric_table(rows: list[dict[str, Any]], kind: str, analysis: str | None = None) -> dict[str, dict[str, list[float]]]:
    """{model label: {metric: [value per seed]}} of the rows of `kind` (and `analysis`)."""
    table: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in sorted(rows, key=lambda r: (r.get("label", ""), r.get("seed", 0))):
        if r.get("kind") == kind and (analysis is None or r.get("analysis") == analysis):
            table[r["label"]][r["metric"]].append(r["value"])
    return table


def model_order(labels) -> list[str]:
    preferred = ["Base (IN)", "Base (IN9)", "Base (MR)", "CLAD+", "CLAD", "CLAD+ (Trivial)", "CLAD (Trivial)"]
    labels = list(labels)
    return [m for m in preferred if m in labels] + sorted(m for m in labels if m not in preferred)


def save_figure(fig, path: Path, dpi: int) -> None:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=dpi, format="png")
    plt.close(fig)


def sweep_only_experiments(config: dict[str, Any]) -> set[str]:
    """Experiments that exist only as sweep points (shown in the sweep figures, not the tables)."""
    return {e for name, sweep in config.get("sweep_points", {}).items() for _, e in sweep["points"]
            if e != config["sweeps"][name]["experiment"]}
