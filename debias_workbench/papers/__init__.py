"""Registry of the paper reproductions. A new paper is one package here (its `PAPER`, a
`paper.Paper`, in `__init__.py`, its report sections beside it and the numbers they quote in
`numbers.yaml`) plus one line below; its sections then appear in the report, its roles order
the tables' rows, and nothing in `report/` or `workflow/` names it.

The registry is read without importing a paper: `PAPERS[name]` imports its package on first use
(and with it the report's plotting code), never torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from debias_workbench.core.registry import LazyRegistry

if TYPE_CHECKING:
    from .paper import Paper

#: name -> "package.PAPER" under papers/, in the order of their sections in the report
REGISTRY: dict[str, str] = {
    "clad": "clad.PAPER",
    "ssl_negatives": "ssl_negatives.PAPER",
    "rebias": "rebias.PAPER",
    "park": "park.PAPER",
}

PAPERS: Mapping[str, Paper] = LazyRegistry(__name__, REGISTRY)
