"""`Paper`: what one paper reproduction plugs into the workbench, declared in its own package
(`papers/<paper>/__init__.py`, its quoted numbers in `numbers.yaml` beside it) and registered in
`papers.REGISTRY`. The generic layers (`report/`, `workflow/`) read these declarations and name
no paper, method or dataset family themselves."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

import yaml

from debias_workbench.report.roles import Role
from debias_workbench.report.section import Section

#: the file of a paper's quoted numbers, in its package
NUMBERS_FILE = "numbers.yaml"


@cache
def load_numbers(package: str) -> dict[str, Any]:
    """The numbers a paper's tables quote (`NUMBERS_FILE` in the paper's `package`)."""
    return yaml.safe_load(resources.files(package).joinpath(NUMBERS_FILE).read_text())


@dataclass(frozen=True)
class Paper:
    """One paper's reproduction, as the report and the workflow see it; the numbers its tables quote
    lie in `NUMBERS_FILE` beside its declaration, read by its sections with `load_numbers(__package__)`.

    - `sections`: its report sections (`render(doc, ctx)` each), in order; `Section.part` places them
      among the main dataset's tables or the grid reports.
    - `roles`: {role: model} of the models its verdicts compare (`report.roles`), in its tables' row order.
    - `intro`: a sentence the report's introduction adds for it (which rows are quoted, say).
    - `analyses`: the analyses (rows of `kind: analysis`) whose numbers `metrics.csv` lists.
    - `shown_elsewhere`: config -> the labels of the runs scored on another dataset that its sections
      lay out (the generic table of other runs leaves them out).

    What it declares to the config layer (the runs its tables add, its cross-checks, the grid report
    kinds its sections lay out) lies in the `workflow` module of its package (`workflow.paper_hooks`),
    which imports no report code.
    """

    sections: tuple[Section, ...] = ()
    roles: dict[str, Role] = field(default_factory=dict)
    intro: str = ""
    analyses: tuple[str, ...] = ()
    shown_elsewhere: Callable[[dict[str, Any]], set[str]] | None = None
