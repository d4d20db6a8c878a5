"""What ReBias plugs into the report: its `PAPER` (`papers.paper.Paper`)."""

from __future__ import annotations

from debias_workbench.report.section import Section

from ..paper import Paper
from . import sections

PAPER = Paper(sections=(Section("rebias", sections.grids, ("last",), part="grids"),))
