"""A report section: a name, a function `render(doc, ctx)` that writes it, and the model-selection
rule(s) its tables show. The generic sections (`report.sections`) and the papers' (`papers.<paper>`)
are both of this type."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .context import ReportContext
    from .document import Document

#: where a paper's section sits: among the tables of the main evaluation dataset's runs (before the
#: generic table of the other runs) or among the grid reports (after it)
PARTS = ("main", "grids")


def has_main_runs(config: dict) -> bool:
    """Whether the config has a run of its own outside the grids: a grids-only config (config/matrix.yaml)
    gets no "main" part, whose tables would hold only the papers' quoted rows."""
    return any(not exp.get("grid") for exp in config["experiments"].values())


@dataclass(frozen=True)
class Section:
    """`name`: what a protocol table's `section` names to stand above it; `selection`: the
    model-selection rule(s) the report writes under the section's first table
    (`report.model_selection`); `part`: one of `PARTS`."""

    name: str
    render: Callable[[Document, ReportContext], None]
    selection: tuple[str, ...] = ()
    part: str = "main"
