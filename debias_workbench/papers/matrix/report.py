"""What the methods x benchmarks table plugs into the report: its `PAPER` (`papers.paper.Paper`)."""

from __future__ import annotations

from debias_workbench.report.section import Section

from ..paper import Paper
from . import sections

PAPER = Paper(sections=(Section("matrix", sections.matrix, ("last",), part="grids"),))
