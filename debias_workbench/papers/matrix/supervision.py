"""What each row of the methods x benchmarks table is given beyond images and their class labels, from the
declarations on both sides, not a list kept by hand: the method's (`training.methods.spec.MethodSpec`: what it
`needs` of a family, the variants it reads row-aligned with its training images, what its design is `given`,
what its arguments' values give it, `x-given`) and the family's (`DatasetFamily.offers`: each capability and
from what it is made; `val_split`: what a vote on the val split reads). "CLAD+ best" is not like for like
against LfF when CLAD+ reads exact foreground masks and LfF nothing: the table says so beside the numbers.

No method here reads bias labels in training: none `needs` them and no family `offers` them (the training
stores keep them for the scores only)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from debias_workbench.pipeline.datasets import family_name, get_family
from debias_workbench.pipeline.datasets.base import DatasetFamily
from debias_workbench.training.methods import spec

#: what the table says of a method given nothing beyond images and labels
NOTHING = "images and labels only (no bias labels)"


def given(method: str, method_args: dict[str, Any], family: DatasetFamily) -> list[tuple[str, str]]:
    """[(what, from what)] registered method `method` with `method_args` is given on `family`'s datasets: each
    capability it requires with the family's word on it, its design's prior, each argument's gift (a vote on
    the val split, with what that split holds)."""
    declared = spec(method)
    out = [(need.replace("_", " "), family.offers.get(need, "not offered")) for need in declared.needs]
    out += [
        (f"{field} ({variant})", family.offers.get(variant, "not offered"))
        for field, variant in declared.aligned_variants.items()
    ]
    if declared.given:
        out.append((declared.given, ""))
    out += [(text, f"the val split: {family.val_split}") for text in declared.given_by(method_args)]
    return out


def short(items: list[tuple[str, str]]) -> str:
    """The table's cell of `given`'s items: what, without the from what (`long`'s list says it)."""
    return "; ".join(what for what, _ in items) if items else NOTHING


def long(items: list[tuple[str, str]]) -> str:
    """`given`'s items in full, for the list under the table."""
    return "; ".join(f"{what}: {source}" if source else what for what, source in items) if items else NOTHING


def row_given(
    config: dict[str, Any], grids: dict[str, dict[str, Any]], rows_of: Callable[[str, dict[str, Any]], str]
) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """({table row: its cell}, {table row: {family: `long`}}) over the `grids` it is in (`rows_of(key, entry)`:
    a grid method's table row); a cell that differs between families names each family."""
    items: dict[str, dict[str, list[tuple[str, str]]]] = {}
    for grid in grids.values():
        family = get_family(family_name(config["datasets"][grid["dataset"]]))
        for key, entry in grid["methods"].items():
            found = given(entry["method"], entry.get("method_args", {}), family)
            items.setdefault(rows_of(key, entry), {})[family.name] = found
    cells, full = {}, {}
    for row, by_family in items.items():
        shorts = {family: short(found) for family, found in by_family.items()}
        distinct = set(shorts.values())
        cells[row] = distinct.pop() if len(distinct) == 1 else "; ".join(f"{f}: {s}" for f, s in shorts.items())
        full[row] = {family: long(found) for family, found in by_family.items()}
    return cells, full
