"""Park et al.'s report section as `render(doc, ctx)`: every grid it reports (Tables 1-3, Fig. 2)."""

from __future__ import annotations

from debias_workbench.report.context import ReportContext
from debias_workbench.report.document import Document

from ..paper import load_numbers
from . import tables


def grids(doc: Document, ctx: ReportContext) -> None:
    tables.amplification_sections(doc, ctx.config, ctx.all_rows, load_numbers(__package__), ctx.out_dir)
