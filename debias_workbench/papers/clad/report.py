"""What CLAD plugs into the report: its `PAPER` (`papers.paper.Paper`)."""

from __future__ import annotations

from debias_workbench.report.roles import Role
from debias_workbench.report.section import Section

from ..paper import Paper
from . import sections

PAPER = Paper(
    sections=(
        Section("clad_table2", sections.table2, ("last",)),
        Section("clad_bg_gap_verdict", sections.bg_gap_verdict),
        Section("bg_challenge_official", sections.official, ("last",)),
        Section("every_variant", sections.every_variant, ("last",)),
        Section("clad_figure5", sections.figure5),
        Section("clad_table3", sections.table3),
        Section("clad_table4", sections.table4, ("last",)),
        Section("clad_table5", sections.table5, ("last",)),
        Section("clad_table6", sections.table6),
        Section("clad_figure6", sections.figure6),
        Section("clad_sweeps", sections.sweeps),
        Section("texture_bias", sections.texture_bias, ("last",)),
    ),
    roles={  # in the tables' row order
        "base_in9": Role("erm", "original", "Base (IN9)"),
        "base_mr": Role("erm", "mixed_rand", "Base (MR)"),
        "clad_plus": Role("clad_plus", "original", "CLAD+"),
        "clad": Role("clad", "original", "CLAD"),
        "clad_plus_trivial": Role("clad_plus_trivial", "original", "CLAD+ (Trivial)"),
        "clad_trivial": Role("clad_trivial", "original", "CLAD (Trivial)"),
        "base_sin9": Role("erm", "stylized", "Base (SIN9)"),
        "s_clad_plus": Role("s_clad_plus", "original", "S-CLAD+"),
        "s_clad": Role("s_clad", "original", "S-CLAD"),
    },
    intro="Rows marked (paper) are quoted from the CLAD paper's Table 2 (ResNet-50 on real ImageNet-9): compare "
    "the *pattern*, not the values, when the data source is synthetic.",
    analyses=("consistency", "fivecrop", "saliency", "texture"),
)
