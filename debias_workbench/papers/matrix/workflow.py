"""What the methods x benchmarks table needs from the workflow: the grid report kind of its grids (each
grid one benchmark family's dataset, its train variants the benchmarks; `workflow.paper_hooks` collects
it). Imports nothing of the report."""

from __future__ import annotations

#: `grids.<name>.report` of the grids the table reads
GRID_REPORT_KINDS = ("matrix",)
