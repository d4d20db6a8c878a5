"""The report: every section (`report.sections.sections()`: the generic ones and the papers') in
order, then the tidy aggregate `metrics.csv`.

Reads only tidy metric rows (JSON lines), the dataset manifests and stores; writes `report.md`,
`report.html`, `metrics.csv` (all rows, aggregated) and PNG figures into `out_dir`.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from debias_workbench.core.atomic import atomic_path
from debias_workbench.core.errors import PipelineError
from debias_workbench.papers import PAPERS
from debias_workbench.pipeline.datasets import counted_metrics

from . import model_selection
from .aggregates import grid_accuracies
from .context import ReportContext, ReportInputs, build_context
from .document import Document
from .helpers import metric_table
from .section import has_main_runs
from .sections import sections


def build_report(inputs: ReportInputs, out_dir: Path) -> None:
    """report.md, report.html and metrics.csv (and the sections' figures) in `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    ctx = build_context(inputs, out_dir)
    config = inputs.config
    doc = Document("Debiasing workbench report", with_summary=True)
    check_protocol_sections(config, [section.name for section in sections()])
    # a grids-only config: no paper section about the main dataset's runs
    skipped = (
        set() if has_main_runs(config) else {s for name in PAPERS for s in PAPERS[name].sections if s.part == "main"}
    )
    for section in sections():
        if section in skipped:
            continue
        for protocol in config.get("protocols", {}).values():
            if protocol["section"] == section.name:
                protocol_table(doc, protocol)
        before = len(doc.blocks)
        section.render(doc, ctx)
        if section.selection:
            add_selection_caption(doc, before, section.selection)
    write_metrics_csv(ctx, out_dir / "metrics.csv")
    for name, text in (("report.md", doc.markdown()), ("report.html", doc.html())):
        with atomic_path(out_dir / name) as tmp:
            tmp.write_text(text)


def check_protocol_sections(config: dict[str, Any], names: list[str]) -> None:
    """Every protocol table goes above a section of the report (`protocols.<paper>.section`): one that names
    none would be left out without a word, now that the sections come from the papers' units."""
    protocols = config.get("protocols", {})
    lost = {p: protocol["section"] for p, protocol in protocols.items() if protocol["section"] not in names}
    if lost:
        raise PipelineError(
            "; ".join(f"protocols.{p}.section: {s!r} is no section of the report" for p, s in lost.items())
            + f" (its sections: {', '.join(names)}): name the section the protocol's table goes above"
        )


def protocol_table(doc: Document, protocol: dict[str, Any]) -> None:
    """The paper's protocol against this run's (`workflow.protocol`): setting / paper / this run / source
    or, where they differ, the reason; under it the notes, each with the rows whose deviations it explains."""
    doc.heading(f"Protocol: {protocol['title']}")
    doc.table(
        ["setting", "paper", "this run", "source; why it differs"],
        [
            [
                r["setting"],
                _setting_text(r["paper"]),
                _setting_text(r["this_run"]),
                r["source"] + (f"; **differs**: {r['deviation']}" if r["deviation"] else ""),
            ]
            for r in protocol["rows"]
        ],
    )
    for note in protocol["notes"]:
        doc.para(note["text"] + (f" (Rows: {'; '.join(note['rows'])}.)" if note["rows"] else ""))


def _setting_text(value: Any) -> str:
    return "—" if value is None else f"`{value}`" if not isinstance(value, str) else value


def add_selection_caption(doc: Document, start: int, rules: tuple[str, ...]) -> None:
    """Under the first table written since block `start`, the model-selection rule(s) of the tables
    (`report.model_selection`); nothing where the section wrote no table."""
    tables = [i for i in range(start, len(doc.blocks)) if doc.blocks[i][0] == "table"]
    if tables:
        doc.blocks.insert(tables[0] + 1, ("p", model_selection.caption(*rules)))


def write_metrics_csv(ctx: ReportContext, path: Path) -> None:
    """One row per (source, model, metric): mean, sample std and the values over seeds."""
    sources = [
        ("eval", ctx.table),
        *(
            (metric, {label: {metric: cols[metric]} for label, cols in ctx.counted.items() if cols.get(metric)})
            for metric in counted_metrics()
        ),
        *((a, metric_table(ctx.rows, "analysis", a)) for name in PAPERS for a in PAPERS[name].analyses),
        *((f"eval:{dataset}", d_table) for dataset, d_table in ctx.other_tables.items()),
    ]
    for name in ctx.config.get("grids", {}):
        grid_table: dict[str, dict[str, list[float]]] = defaultdict(dict)
        for (variant, key, test_set), values in grid_accuracies(ctx.all_rows, name).items():
            grid_table[f"{key} {variant}"][test_set] = values
        sources.append((f"grid:{name}", grid_table))
    with atomic_path(path) as tmp:
        with open(tmp, "w", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(["source", "model", "metric", "mean", "std", "n_seeds", "values"])
            for source, label, cols in ((src, label, cols) for src, t in sources for label, cols in sorted(t.items())):
                for metric, values in sorted(cols.items()):
                    writer.writerow(
                        [
                            source,
                            label,
                            metric,
                            f"{np.mean(values):.4f}",
                            f"{np.std(values, ddof=1) if len(values) > 1 else 0.0:.4f}",
                            len(values),
                            " ".join(f"{v:.4f}" for v in values),
                        ]
                    )
