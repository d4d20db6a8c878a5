"""ReBias (Bahng et al., ICML 2020): the Biased MNIST grids' Table 1, verdict and Figs. 3-4, and the
texture / image Table 2."""

from __future__ import annotations

from debias_workbench.report.section import Section

from ..paper import Paper
from . import sections

PAPER = Paper(sections=(Section("rebias", sections.grids, ("last",), part="grids"),), grid_report_kinds=("rebias",))
