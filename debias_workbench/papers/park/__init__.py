"""Bias amplification (Park, Chung & Choo, CVPR 2024): LfF, BiasEnsemble and the paper's method over
Colored MNIST, Waterbirds, BFFHQ and BAR; Tables 1-3 and Fig. 2 of the grids it reports."""

from __future__ import annotations

from debias_workbench.report.section import Section

from ..paper import Paper
from . import sections

PAPER = Paper(
    sections=(Section("park", sections.grids, ("validation", "oracle"), part="grids"),),
    grid_report_kinds=("park", "park_ablation"),
)
