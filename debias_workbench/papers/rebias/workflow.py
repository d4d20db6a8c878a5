"""What ReBias's tables need from the workflow: the grid report kind they fill (Table 1, Figs. 3-4;
collected by `workflow.paper_hooks`, the generic layers name no paper)."""

from __future__ import annotations

#: `grids.<name>.report` kind of ReBias's section
GRID_REPORT_KINDS = ("rebias",)
#: Figs. 3-4 show the runs of one train variant (`figure_variant`)
FIGURE_VARIANT_KINDS = GRID_REPORT_KINDS
