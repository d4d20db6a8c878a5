"""The papers' workflow declarations, collected so that the generic workflow layer names no paper:
each paper folder under `debias_workbench/papers/` may hold a `workflow` module declaring any of

* `EXPANSIONS`: functions config -> config adding the runs its tables need (CLAD Table 5's U2-Net runs),
  applied after scope and smoke mode, before the sweeps and grids;
* `CHECKS`: functions config -> problems, each naming its dotted key (run with the cross-reference checks);
* `GRID_REPORT_KINDS`: the `grids.<name>.report` values its sections accept (the schema's enum);
* `RUN_TABLES`: functions expanded config -> {experiment: table} for runs its expansions add
  (`workbench plan` groups them under it).

Interim: the paper registry (`debias_workbench.papers`) will declare these; until then the modules are
found by folder, in the folders' order, and imported on first use."""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from collections.abc import Callable
from functools import cache
from types import ModuleType
from typing import Any

import debias_workbench.papers

Config = dict[str, Any]
#: the module of a paper folder that holds its workflow declarations
WORKFLOW_MODULE = "workflow"


@cache
def paper_workflow_modules() -> tuple[ModuleType, ...]:
    """Each paper's `workflow` module (papers without one declare nothing to the workflow)."""
    package = debias_workbench.papers
    names = sorted(info.name for info in pkgutil.iter_modules(package.__path__) if info.ispkg)
    dotted = [f"{package.__name__}.{name}.{WORKFLOW_MODULE}" for name in names]
    return tuple(importlib.import_module(name) for name in dotted if importlib.util.find_spec(name) is not None)


def _declared(attribute: str) -> tuple[Any, ...]:
    """Every paper's `attribute` tuple, concatenated in the papers' order."""
    return tuple(item for module in paper_workflow_modules() for item in getattr(module, attribute, ()))


def expansions() -> tuple[Callable[[Config], Config], ...]:
    return _declared("EXPANSIONS")


def checks() -> tuple[Callable[[Config], list[str]], ...]:
    return _declared("CHECKS")


def grid_report_kinds() -> tuple[str, ...]:
    return _declared("GRID_REPORT_KINDS")


def run_tables() -> tuple[Callable[[Config], dict[str, str]], ...]:
    return _declared("RUN_TABLES")


def expand(config: Config) -> Config:
    """`config` with every paper's expansions applied, in the papers' order."""
    for expansion in expansions():
        config = expansion(config)
    return config
