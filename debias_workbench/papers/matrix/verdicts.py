"""The matrix's verdicts for the report's summary (`Document.verdict`): each method against ERM on each
benchmark where the table compares them, and where it does not judge them (a failed capability check)."""

from __future__ import annotations

from debias_workbench.report.document import Document

from .tables import Matrix


def record(doc: Document, table: Matrix) -> None:
    """Records every compared or not-informative cell of `table`, row by row, as its section's verdict."""
    for key, label in table.methods.items():
        for j, bench in enumerate(table.benchmarks):
            cell = table.cells[(key, j)]
            comparison = f"{label} vs ERM, {bench.title}"
            if cell.status == "compared" and cell.interval is not None:
                reading = "" if cell.better is None else "better than ERM" if cell.better else "worse than ERM"
                doc.verdict(comparison, cell.interval, reading)
            elif cell.status == "not informative":
                doc.no_verdict(comparison, "the benchmark fails its capability check (its line above the table)")
