"""The workflow's schema: `config/schema.yaml` with every registered dataset family's section
(`DatasetFamily.schema()`, declared beside the family's module) merged in, so a new family is its
module, its section and one registry line, and is validated and documented like the others; and the
grid report kinds the papers accept (`workflow.paper_hooks`) as the values of `grids.<name>.report`."""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from debias_workbench.core.schema_defaults import SCHEMA_PATH
from debias_workbench.pipeline.datasets import DEFAULT_FAMILY, FAMILIES

from . import paper_hooks


def family_def(family: str) -> str:
    """The `$defs` name of a family's dataset section."""
    return f"{family}_dataset"


@cache
def _load(path: Path) -> dict[str, Any]:
    schema = yaml.safe_load(path.read_text())
    for name, cls in FAMILIES.items():
        schema["$defs"][family_def(name)] = cls.schema()
    # a dataset without `family` is an in9 one; every other family is picked by its name
    choice: dict[str, Any] = {"$ref": f"#/$defs/{family_def(DEFAULT_FAMILY)}"}
    for name in reversed([n for n in FAMILIES if n != DEFAULT_FAMILY]):
        choice = {
            "if": {"required": ["family"], "properties": {"family": {"const": name}}},
            "then": {"$ref": f"#/$defs/{family_def(name)}"},
            "else": choice,
        }
    schema["$defs"]["dataset"] = choice
    grid = schema["properties"]["grids"]["additionalProperties"]["properties"]
    grid["report"] = {"enum": list(paper_hooks.grid_report_kinds()), **grid["report"]}
    return schema


def grid_report(grid: dict[str, Any]) -> str:
    """The report kind of a grid: its `report`, or the schema's default where it gives none."""
    return (
        grid.get("report")
        or _load(SCHEMA_PATH)["properties"]["grids"]["additionalProperties"]["properties"]["report"]["default"]
    )


def load_schema(path: Path = SCHEMA_PATH) -> dict[str, Any]:
    """The complete schema (a copy: callers may change it)."""
    return copy.deepcopy(_load(Path(path)))
