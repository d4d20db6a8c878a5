"""The heatmap of the methods x benchmarks table: each cell coloured by its corrected verdict against its
row's baseline (`verdicts`: green better, red worse, grey where the corrected verdict cannot tell, amber where a
better number was bought with a worse accuracy) with the strength of the colour the effect size (|difference|
against the largest in the table), reference cells (ERM, plain SSL) white, cells without a like-for-like
baseline white with "n/b", cells that cannot run dark grey with a cross, cells not run blank with a dash, cells
of a benchmark whose ERM fails its capability check near-white with "n/i"."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from debias_workbench.report.helpers import save_figure

from .tables import Matrix
from .verdicts import Cell

#: RGB of the cells no verdict colours
FIXED = {
    "reference": (1.0, 1.0, 1.0),
    "not run": (1.0, 1.0, 1.0),
    "no reference": (1.0, 1.0, 1.0),
    "cannot run": (0.45, 0.45, 0.45),
    "cannot tell": (0.85, 0.85, 0.85),
    "not informative": (0.93, 0.93, 0.93),
    "no baseline": (1.0, 1.0, 1.0),
    "traded": (0.95, 0.70, 0.25),
}
#: what a cell shows, by status (a compared cell: its estimate)
MARKS = {
    "reference": "ref",
    "not run": "–",
    "no reference": "?",
    "no baseline": "n/b",
    "cannot run": "×",
    "not informative": "n/i",
}


def cell_colour(cell: Cell, scale: float) -> tuple[float, float, float]:
    """The RGB of a cell: its verdict's hue at a strength growing with |effect| / `scale`."""
    if cell.status != "compared":
        return FIXED[cell.status]
    if cell.better is None:
        return FIXED["traded" if cell.guard else "cannot tell"]
    hue = (0.10, 0.60, 0.25) if cell.better else (0.80, 0.15, 0.15)
    strength = 0.3 + 0.7 * min(abs(cell.effect) / scale, 1.0)
    return tuple(1.0 - strength * (1.0 - c) for c in hue)  # type: ignore[return-value]


def heatmap(matrix: Matrix, path: Path) -> None:
    """Write the heatmap of `matrix` to `path` (PNG, atomically)."""
    keys = list(matrix.methods)
    effects = [abs(c.effect) for c in matrix.cells.values() if c.status == "compared" and np.isfinite(c.effect)]
    scale = max(effects, default=0.0) or 1.0
    n_rows, n_cols = len(keys), len(matrix.benchmarks)
    fig, ax = plt.subplots(figsize=(3.0 + 1.5 * n_cols, 2.0 + 0.5 * n_rows))
    colours = [[cell_colour(matrix.cells[(k, j)], scale) for j in range(n_cols)] for k in keys]
    ax.imshow(np.array(colours), aspect="auto")
    for i, key in enumerate(keys):
        for j in range(n_cols):
            cell = matrix.cells[(key, j)]
            mark = f"{cell.interval.estimate:+.1f}" if cell.interval is not None else MARKS[cell.status]
            ax.text(j, i, mark, ha="center", va="center", fontsize=7, color="white" if mark == "×" else "black")
    titles = [b.title.replace(": ", ":\n", 1) for b in matrix.benchmarks]  # dataset and variant above the number
    ax.set_xticks(range(n_cols), titles, rotation=30, ha="right", fontsize=7)
    ax.set_yticks(range(n_rows), [matrix.methods[k] for k in keys], fontsize=7)
    ax.set_title(
        "Difference from each row's baseline (points), Benjamini-Hochberg-corrected: green better, red worse, "
        "grey cannot tell, amber traded",
        fontsize=8,
    )
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
