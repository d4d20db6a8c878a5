"""The configuration reference (docs/configuration.md), generated from `config/schema.yaml`.

workbench config-reference           # rewrite the reference section of docs/configuration.md
workbench config-reference --check   # exit 1 if docs/configuration.md is out of date (the tests do this)
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from debias_workbench.pipeline.datasets import FAMILIES

from .schema import family_def, load_schema
from .user_paths import PATH_KEYWORD, WHEN_KEYWORD

#: the page holding the generated reference between the START and END markers
REFERENCE_PAGE = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
START, END = "<!-- config-reference:start -->", "<!-- config-reference:end -->"


def def_places() -> dict[str, str]:
    """{shared definition: the key it is shown under}: each registered family's section (read at each call: a family
    registered after this module's import is listed too) and the training fields."""
    return {**{family_def(name): f"datasets.<{name} dataset>" for name in FAMILIES}, "training_fields": "training"}


def schema_keys(schema: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any], bool]]:
    """(dotted key, its schema, required) of every key, the shared definitions in place."""
    places = def_places()

    def walk(node: dict[str, Any], prefix: str) -> Iterator[tuple[str, dict[str, Any], bool]]:
        required = set(node.get("required", []))
        for name, sub in (node.get("properties") or {}).items():
            key = f"{prefix}{name}"
            ref = sub.get("$ref", "").removeprefix("#/$defs/")
            if key in places.values() or (ref and places.get(ref) == key):
                yield key, sub, name in required
                yield from walk(schema["$defs"][ref], f"{key}.")
                continue
            yield key, sub, name in required
            if ref and ref not in places:  # a shared definition used in several places (the MNIST digit source)
                yield from walk(schema["$defs"][ref], f"{key}.")
            for alt in sub.get("oneOf", []):
                yield from walk(alt, f"{key}.")
            yield from walk(sub, f"{key}.")
        extra = node.get("additionalProperties")
        if isinstance(extra, dict) and prefix.rstrip(".") != "datasets":
            yield from walk(extra, f"{prefix}<name>.")

    yield from walk(schema, "")
    for name, place in places.items():
        if place != "training":
            yield place, {"description": schema["$defs"][name].get("description", ""), "type": "object"}, False
            yield from walk(schema["$defs"][name], f"{place}.")


def _type(sub: dict[str, Any], defs: dict[str, Any]) -> str:
    ref = sub.get("$ref", "").removeprefix("#/$defs/")
    if ref == "training_fields":
        return "object" if "required" in sub else "same keys as `training`"
    if ref:
        sub = {**defs[ref], **{k: v for k, v in sub.items() if k != "$ref"}}
    if "enum" in sub:
        return " \\| ".join(map(str, sub["enum"]))
    if "const" in sub:
        return f"`{sub['const']}`"
    if "oneOf" in sub and "type" not in sub and "properties" not in sub:
        return " or ".join(_type(alt, defs) for alt in sub["oneOf"])
    kind = sub.get("type", "object" if "properties" in sub else "null or object" if "oneOf" in sub else "")
    kind = " or ".join(kind) if isinstance(kind, list) else kind
    bounds = [
        f"≥ {sub['minimum']}" if "minimum" in sub else "",
        f"> {sub['exclusiveMinimum']}" if "exclusiveMinimum" in sub else "",
        f"≤ {sub['maximum']}" if "maximum" in sub else "",
        f"< {sub['exclusiveMaximum']}" if "exclusiveMaximum" in sub else "",
    ]
    bounds = [b for b in bounds if b]
    if "pattern" in sub:
        bounds.append(f"matching `{sub['pattern']}`")
    if PATH_KEYWORD in sub:  # checked before the job graph is built (workbench.user_paths)
        bounds.append(f"an existing {sub[PATH_KEYWORD]}")
    for sibling, values in sub.get(WHEN_KEYWORD, {}).items():
        bounds.append(f"read when `{sibling}` is {' or '.join(values)}")
    return kind + (f" ({', '.join(bounds)})" if bounds else "")


def _default(sub: dict[str, Any], required: bool) -> str:
    if "default" not in sub:
        return "–"
    value = sub["default"]
    if value is None and required:
        return "required"
    if isinstance(value, dict) and value:
        return "see config/config.yaml" if "properties" not in sub and "$ref" not in sub else "see its keys"
    text = json.dumps(value, ensure_ascii=False)
    return f"`{text}`" if len(text) <= 60 else "see config/config.yaml"


def reference_markdown() -> str:
    schema = load_schema()
    rows = ["| Key | Type | Default | Description |", "|---|---|---|---|"]
    for key, sub, required in schema_keys(schema):
        description = str(sub.get("description", "")).replace("|", "\\|").replace("\n", " ")
        rows.append(f"| `{key}` | {_type(sub, schema['$defs'])} | {_default(sub, required)} | {description} |")
    return "\n".join(rows) + "\n"


def updated_page(page: str, reference: str) -> str:
    """`page` with the text between its START and END markers replaced by `reference`."""
    head, rest = page.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{reference}{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="workbench config-reference")
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/configuration.md is out of date")
    args = parser.parse_args(argv)
    text = REFERENCE_PAGE.read_text()
    new = updated_page(text, reference_markdown())
    if args.check:
        if new != text:
            print(
                "docs/configuration.md's configuration reference is out of date: run workbench config-reference",
                file=sys.stderr,
            )
            return 1
        return 0
    REFERENCE_PAGE.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
