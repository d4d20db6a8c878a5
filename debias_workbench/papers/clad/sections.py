"""The CLAD paper's report sections as `render(doc, ctx)`: each reads what its table needs from the
report's context and the paper's quoted numbers (`numbers.yaml`), then calls its table or figure in
`tables` / `figures` / `texture`."""

from __future__ import annotations

from debias_workbench.report.context import ReportContext
from debias_workbench.report.document import Document

from ..paper import load_numbers
from . import figures, tables, texture


def table2(doc: Document, ctx: ReportContext) -> None:
    tables.table2(doc, ctx.main, load_numbers(__package__)["clad_table2"], ctx.roles)


def bg_gap_verdict(doc: Document, ctx: ReportContext) -> None:
    tables.bg_gap_verdict(doc, ctx.main, ctx.official_table, ctx.roles)


def official(doc: Document, ctx: ReportContext) -> None:
    tables.official(doc, ctx.config["evaluation"].get("official_dataset"), ctx.official_table, ctx.roles)


def every_variant(doc: Document, ctx: ReportContext) -> None:
    tables.all_variants(doc, ctx.main, ctx.dataset["variants"], ctx.roles)


def figure5(doc: Document, ctx: ReportContext) -> None:
    path = ctx.out_dir / "fig5_mixed_same_vs_rand.png"
    figures.figure5(doc, ctx.main, load_numbers(__package__)["clad_table2"], path, ctx.roles)


def table3(doc: Document, ctx: ReportContext) -> None:
    tables.table3(doc, ctx.rows, load_numbers(__package__)["clad_table3"], ctx.roles)


def table4(doc: Document, ctx: ReportContext) -> None:
    tables.table4(doc, ctx.main, load_numbers(__package__)["clad_table4"], ctx.roles)


def table5(doc: Document, ctx: ReportContext) -> None:
    tables.table5(doc, ctx.config, ctx.rows, load_numbers(__package__)["clad_table5"])


def table6(doc: Document, ctx: ReportContext) -> None:
    fraction = ctx.config["analyses"]["fivecrop_fraction"]
    tables.table6(doc, ctx.rows, load_numbers(__package__)["clad_table6"], fraction, ctx.roles)


def figure6(doc: Document, ctx: ReportContext) -> None:
    figures.figure6(doc, ctx.config, ctx.rows, ctx.saliency_arrays, ctx.out_dir, ctx.roles)


def sweeps(doc: Document, ctx: ReportContext) -> None:
    figures.sweep_figures(doc, ctx.config, ctx.table, ctx.out_dir)


def texture_bias(doc: Document, ctx: ReportContext) -> None:
    numbers = load_numbers(__package__)
    texture.texture_sections(doc, ctx.config, ctx.with_counted, numbers, ctx.stores, ctx.out_dir, ctx.roles)
