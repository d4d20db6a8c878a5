"""What the methods x benchmarks table needs from the workflow: the grid report kind of its grids (each
grid one benchmark family's dataset, its train variants the benchmarks), the runs it plans beside them (the
bias-free references of its capability line, the scoring points of the papers' selection rules:
`reference.expand_matrix`) and the check that each reference's variant is built (`workflow.paper_hooks`
collects them). Imports nothing of the report."""

from __future__ import annotations

from .reference import KIND, expand_matrix, reference_problems

#: `grids.<name>.report` of the grids the table reads
GRID_REPORT_KINDS = (KIND,)
EXPANSIONS = (expand_matrix,)
CHECKS = (reference_problems,)
