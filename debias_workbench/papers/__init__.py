"""Registry of the paper reproductions. A new paper is one package here (its `PAPER`, a
`paper.Paper`, in `report.py`, its report sections beside it and the numbers they quote in
`numbers.yaml`) plus one line below; its sections then appear in the report, its roles order
the tables' rows, and nothing in `report/` or `workflow/` names it.

The registry is read without importing a paper: `PAPERS[name]` imports its package on first use
(and with it the report's plotting code), never torch. What a paper declares to the config layer
(expansions, checks, grid report kinds) lies in `workflow.py` beside its `report.py`, which the
workflow layer imports without the report's code (`workflow.paper_hooks`).
"""

from __future__ import annotations

from typing import Any

from debias_workbench.core.registry import LazyRegistry

#: name -> "package.report.PAPER" under papers/, in the order of their sections in the report
REGISTRY: dict[str, str] = {
    "clad": "clad.report.PAPER",
    "ssl_negatives": "ssl_negatives.report.PAPER",
    "rebias": "rebias.report.PAPER",
    "park": "park.report.PAPER",
    "matrix": "matrix.report.PAPER",
}

#: name -> its `paper.Paper` (imported on first access; typed loosely, as naming Paper here would close an import
#: circle through the report code)
PAPERS: LazyRegistry[Any] = LazyRegistry(__name__, REGISTRY)
