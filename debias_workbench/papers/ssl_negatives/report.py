"""What Ge et al.'s non-semantic negatives plugs into the report: its `PAPER` (`papers.paper.Paper`)."""

from __future__ import annotations

from typing import Any

from debias_workbench.report.section import Section

from ..paper import Paper
from . import sections
from .runs import ssl_runs


def shown_elsewhere(config: dict[str, Any]) -> set[str]:
    """The labels of the self-supervised runs: Table 1 lays them out on whichever dataset they are scored."""
    return {r["label"] for r in ssl_runs(config)}


PAPER = Paper(
    sections=(
        Section("non_semantic_negatives", sections.table1, ("last",)),
        Section("other_datasets", sections.other_datasets, ("last",)),
    ),
    shown_elsewhere=shown_elsewhere,
)
