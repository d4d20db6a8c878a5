"""Ge et al.'s report sections as `render(doc, ctx)`: Table 1 on the main evaluation dataset, then on
every other dataset its runs are scored on (`eval_dataset`: ImageNet-100)."""

from __future__ import annotations

from debias_workbench.report.context import ReportContext
from debias_workbench.report.document import Document

from ..paper import load_numbers
from . import tables


def table1(doc: Document, ctx: ReportContext) -> None:
    numbers = load_numbers(__package__)
    tables.ssl_sections(
        doc,
        ctx.config,
        ctx.with_counted,
        ctx.rows,
        numbers,
        ctx.out_dir,
        ctx.roles,
        scored_elsewhere=ctx.scored_elsewhere,
    )


def other_datasets(doc: Document, ctx: ReportContext) -> None:
    numbers = load_numbers(__package__)
    for dataset, d_table in ctx.other_tables.items():
        tables.dataset_sections(
            doc, ctx.config, dataset, d_table, ctx.elsewhere[dataset], numbers, ctx.out_dir, ctx.rows
        )
