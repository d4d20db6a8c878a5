"""Runs declared on their own and scored on a dataset no paper section lays out (e.g. an experiment
on a Colored MNIST dataset): one table per dataset, the columns its family declares
(`DatasetFamily.headline`), so every run's numbers reach the report."""

from __future__ import annotations

from typing import TYPE_CHECKING

from debias_workbench.papers import PAPERS
from debias_workbench.pipeline.datasets import column_title, family_name

from ..helpers import headline, mean_std, model_order

if TYPE_CHECKING:
    from ..context import ReportContext
    from ..document import Document


def other_runs(doc: Document, ctx: ReportContext) -> None:
    shown = {label for name in PAPERS if (claims := PAPERS[name].shown_elsewhere) for label in claims(ctx.config)}
    for dataset, table in ctx.other_tables.items():
        labels = [label for label in model_order(table, ctx.roles) if label not in shown]
        if not labels:
            continue
        family = family_name(ctx.config["datasets"][dataset])
        columns, titles = headline(family)
        if not columns:
            columns = sorted({c for label in labels for c in table[label]})
            titles = [column_title(c, family) for c in columns]
        doc.heading(f"Runs scored on `{dataset}`: accuracy (%)")
        doc.para("Mean ± sample std over seeds, on the test sets the dataset's family declares.")
        doc.table(
            ["Model", *titles], [[label, *[mean_std(table[label].get(c, [])) for c in columns]] for label in labels]
        )
