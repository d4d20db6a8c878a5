"""Where the workflow's config schema lies (`config/schema.yaml`), and the defaults it declares.

A default is written once, in the schema: code that reads a setting the user may leave out takes
its default from here (`defaults`), never from a literal of its own.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import yaml

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "config" / "schema.yaml"


@cache
def _definitions() -> dict[str, Any]:
    return yaml.safe_load(SCHEMA_PATH.read_text())["$defs"]


def _default(node: dict[str, Any]) -> Any:
    """A property's declared default; for an object without one, the defaults of its properties."""
    if "default" in node:
        return node["default"]
    if node.get("type") == "object" and "properties" in node:
        return {k: _default(v) for k, v in node["properties"].items()}
    return None


def defaults(definition: str) -> dict[str, Any]:
    """{key: default} of the properties of the schema's `$defs.<definition>` (a fresh copy)."""
    return {k: _default(v) for k, v in _definitions()[definition]["properties"].items()}


def filled(definition: str, key: str, given: dict[str, Any] | None) -> dict[str, Any]:
    """The object property `key` of `$defs.<definition>` as a run reads it: `given`, or the object's
    own default where it is not given, over the defaults of the object's properties (JSON Schema's
    reading of a partial object: a property added later, whose default the object's own predates,
    is filled too)."""
    node = _definitions()[definition]["properties"][key]
    given = _default(node) if given is None else given
    return {**{k: _default(v) for k, v in node["properties"].items()}, **given}
