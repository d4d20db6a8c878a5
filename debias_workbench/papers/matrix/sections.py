"""The report section of the methods x benchmarks table, `render(doc, ctx)`: nothing where the config has
no `report: matrix` grid, else the table (each cell's interval and verdict, or why it cannot run) and
its heatmap."""

from __future__ import annotations

from debias_workbench.core.statistics import METHOD
from debias_workbench.report.context import ReportContext
from debias_workbench.report.document import Document

from .figure import heatmap
from .selection import PAPER, rules_paragraph
from .tables import Matrix, build_matrix, matrix_grids, method_rows

#: the heatmap's file in the report folder
FIGURE = "matrix_heatmap.png"


def matrix(doc: Document, ctx: ReportContext) -> None:
    """The table of every method on every benchmark of the config's `report: matrix` grids and its heatmap."""
    table = build_matrix(ctx.config, ctx.all_rows)
    if table is None:
        return
    doc.heading("Every method on every benchmark: difference from ERM")
    doc.para(
        "Each column is one benchmark (a dataset trained on one variant) judged by a number its dataset family "
        "declares (the arrow: which way is better); each cell is the method's mean over seeds minus ERM's on that "
        "benchmark, with its 95 % interval and verdict, \"better\" or \"worse\" than ERM only where the interval "
        "excludes 0. Every run is scored at its last iterate, whatever its method (selection rule \"last\"); the "
        "second table scores each method by its own paper's rule, against ERM by the same rule. Self-supervised "
        "rows are scored through their linear probe. A cell that cannot run says what the method needs that the "
        "family does not offer; "
        f"\"not run\": no runs of it in this configuration. {METHOD}"
    )
    seen = set()
    for i, bench in enumerate(table.benchmarks):  # one line per benchmark, before the cells it judges
        if (bench.grid, bench.train_variant) not in seen:
            seen.add((bench.grid, bench.train_variant))
            doc.para(table.capable[i][1])
    cells_table(doc, table)
    heatmap(table, ctx.out_dir / FIGURE)
    doc.image(
        FIGURE,
        "Difference from ERM per method and benchmark: green better, red worse (the stronger, the larger the "
        "difference against the largest in the table), grey where the interval cannot tell; × cannot run, – not run, "
        "n/i not informative (the benchmark's capability check fails or cannot tell).",
    )
    paper = build_matrix(ctx.config, ctx.all_rows, PAPER)
    assert paper is not None  # the same grids
    doc.heading("Every method on every benchmark, by each paper's selection rule")
    doc.para(
        "The same runs, each scored by its method's own paper's model-selection rule (selection rule \"paper\"), "
        "against ERM scored by the same rule; the capability lines above hold for both tables. The validation rule "
        "picks the scoring point (every few steps, and the end) with the best accuracy on the benchmark's "
        "validation set, the train variant's own val split, and shows the test value there. "
        + rules_paragraph(method_rows(matrix_grids(ctx.config)))
    )
    cells_table(doc, paper)


def cells_table(doc: Document, table: Matrix) -> None:
    """The table's cells, a row per method, a column per benchmark."""
    header = ["Method", *[bench.title for bench in table.benchmarks]]
    rows = [
        [label, *[table.cells[(key, j)].text for j in range(len(table.benchmarks))]]
        for key, label in table.methods.items()
    ]
    doc.table(header, rows)
