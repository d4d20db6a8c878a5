"""The matrix's verdicts for the report's summary (`Document.verdict`): each compared cell against its row's
baseline, as the table judges it (the corrected verdict, `verdicts.corrected`), and each cell the table does
not judge because its benchmark fails the capability check."""

from __future__ import annotations

from debias_workbench.core.statistics import LEVEL
from debias_workbench.report.document import Document
from debias_workbench.training.methods.spec import LAST

from .selection import PAPER
from .tables import Matrix
from .verdicts import CORRECTION


def record(doc: Document, table: Matrix) -> None:
    """Records every compared or not-informative cell of `table`, row by row, as its section's verdict; of the
    paper-rule table only the compared cells scored by another rule than the last iterate (the others hold the
    first table's values, and are recorded there)."""
    paper = table.selection == PAPER
    rule = ", by each paper's selection rule" if paper else ""
    for key, label in table.methods.items():
        for j, bench in enumerate(table.benchmarks):
            cell = table.cells[(key, j)]
            if paper and (cell.rule == LAST or cell.status != "compared"):
                continue
            comparison = f"{label} vs {cell.baseline or 'ERM'}, {bench.title}{rule}"
            if cell.status == "compared" and cell.interval is not None:
                significant = cell.q_value < 1 - LEVEL  # a traded gain is significant, yet not "better"
                way = "cannot tell" if not significant else "higher" if cell.interval.estimate > 0 else "lower"
                reading = cell.guard or ("" if cell.better is None else "better" if cell.better else "worse")
                doc.verdict(
                    comparison, cell.interval, reading, corrected=(way, f"{CORRECTION}: q = {cell.q_value:.2g}")
                )
            elif cell.status == "not informative":
                doc.no_verdict(comparison, "the benchmark fails its capability check (its line above the table)")
