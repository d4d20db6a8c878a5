"""The report section of the methods x benchmarks table, `render(doc, ctx)`: nothing where the config has
no `report: matrix` grid, else the table at the last iterate (each row's baseline and what it is given, each
cell's corrected verdict beside its uncorrected interval, or why it cannot run), its heatmap, and the same
runs by each paper's own selection rule."""

from __future__ import annotations

from debias_workbench.core.statistics import METHOD
from debias_workbench.report.context import ReportContext
from debias_workbench.report.document import Document

from .contrasts import SETTINGS
from .figure import heatmap
from .selection import PAPER, rules_paragraph
from .summary import record
from .supervision import NOTHING
from .tables import Matrix, build_matrix, matrix_grids, method_rows
from .verdicts import CORRECTION

#: the heatmap's file in the report folder
FIGURE = "matrix_heatmap.png"


def matrix(doc: Document, ctx: ReportContext) -> None:
    """The table of every method on every benchmark of the config's `report: matrix` grids, its heatmap, and the
    table by each paper's selection rule."""
    table = build_matrix(ctx.config, ctx.all_rows)
    if table is None:
        return
    doc.heading("Every method on every benchmark: difference from a like-for-like baseline")
    doc.para(_how_judged(table))
    seen = set()
    for i, bench in enumerate(table.benchmarks):  # one line per benchmark, before the cells it judges
        if (bench.grid, bench.train_variant) not in seen:
            seen.add((bench.grid, bench.train_variant))
            doc.para(table.capable[i][1])
    cells_table(doc, table)
    doc.para(
        "What each row is given, per benchmark family, from what (the method's declaration: what it needs, the "
        "variants it reads beside its training images, its design, its arguments; the family's: what it offers "
        "and from what, what its val split holds): "
        + " ".join(
            f"{table.methods[key]}: {_per_family(by_family)}."
            for key, by_family in table.given_in_full.items()
            if key in table.methods
        )
    )
    heatmap(table, ctx.out_dir / FIGURE)
    doc.image(
        FIGURE,
        "Difference from each row's baseline per method and benchmark, coloured by the corrected verdict "
        "(Benjamini-Hochberg): green better, red worse (the stronger, the larger the difference against the "
        "largest in the table), grey where the correction cannot tell, amber a better number bought with a worse "
        "accuracy; ref a reference row (ERM, plain SSL), n/b no like-for-like baseline, × cannot run, – not run, "
        "n/i not informative (the benchmark's capability check fails or cannot tell).",
    )
    paper = build_matrix(ctx.config, ctx.all_rows, PAPER)
    assert paper is not None  # the same grids
    doc.heading("Every method on every benchmark, by each paper's selection rule")
    doc.para(
        "The same runs, each scored by its method's own paper's model-selection rule (selection rule \"paper\"), "
        "against its baseline scored by the same rule, the verdicts corrected as in the table above (its own "
        "family of tests); the capability lines above hold for both tables. The validation rule picks the scoring "
        "point (every few steps, and the end) with the best accuracy on the benchmark's validation set, the train "
        "variant's own val split, and shows the test value there. "
        + rules_paragraph(method_rows(matrix_grids(ctx.config)))
    )
    cells_table(doc, paper)


def cells_table(doc: Document, table: Matrix) -> None:
    """The table's cells, a row per method (its baseline and what it is given), a column per benchmark; each
    judged cell recorded for the report's verdict summary."""
    header = ["Method", "Compared with", "Given beyond images and labels", *[b.title for b in table.benchmarks]]
    rows = [
        [
            label,
            table.baselines.get(key, ""),
            table.given.get(key, NOTHING),
            *[table.cells[(key, j)].text for j in range(len(table.benchmarks))],
        ]
        for key, label in table.methods.items()
    ]
    doc.table(header, rows)
    record(doc, table)


def _per_family(by_family: dict[str, str]) -> str:
    """One text where every family's is the same, else each with its family."""
    if len(set(by_family.values())) == 1:
        return next(iter(by_family.values()))
    return "; ".join(f"[{family}] {text}" for family, text in by_family.items())


def _how_judged(table: Matrix) -> str:
    """The section's paragraph on how a cell is judged (docs/matrix.md, "How a cell is judged")."""
    tests = sum(1 for cell in table.cells.values() if cell.status == "compared")
    settings = ", ".join(f"{what} ({', '.join(keys)})" for what, keys in SETTINGS.items())
    guarded = sorted({b.metric.title for b in table.benchmarks if b.metric.trades_against})
    guard = (
        f"A number that can be bought with accuracy ({'; '.join(guarded)}) says \"better\" only where the accuracy "
        "it trades against is not worse than the baseline's by its own interval; otherwise the cell says what "
        "was paid. "
        if guarded
        else ""
    )
    return (
        "Each column is one benchmark (a dataset trained on one variant) judged by a number its dataset family "
        "declares (the arrow: which way is better). Each row is compared with the baseline of its own regime in "
        "its grid, named in \"Compared with\": a supervised method with ERM, a self-supervised one (scored "
        "through its linear probe) with plain SSL of the same method and recipe (the difference is then its "
        "negatives'); reference rows show their mean. A row and its baseline must share "
        f"{settings}; where no run of the grid does, the cell says so instead of comparing. Each cell is the "
        f"method's mean over seeds minus its baseline's, with its uncorrected 95 % interval. {METHOD} In this "
        f"table the verdicts are corrected, by {CORRECTION} across the family of every compared cell of the "
        f"table ({tests} tests): \"better\" or \"worse\" only where the cell's q-value (its p-value, from the "
        "interval's own statistic: the level at which the interval reaches 0, adjusted by the step-up) is below "
        "0.05, so that of the cells that say so at most 5 % are expected to be false; the uncorrected interval "
        f"stands beside it. {guard}"
        "Every run is scored at its last iterate, whatever its method (selection rule \"last\"); the second table "
        "scores each by its own paper's rule. No method here reads bias labels in training; \"Given beyond images "
        "and labels\" says what each is given instead. A cell that cannot run says what the method needs that the "
        "family does not offer; \"not run\": no runs of it in this configuration."
    )
