"""Whether a method can run on a dataset family, declared on both sides, never guessed: a method's
`requires` (`training.methods.spec.MethodSpec`: the capabilities it `needs` and the variants it reads
row-aligned with its training images) against the family's `offers` ({capability: from what},
`pipeline.datasets.base.DatasetFamily`). A method that needs masked backgrounds is refused on a family
that builds none, and the reason names the method, the family and what is missing, so that a table of
every method on every benchmark shows such a cell as one that cannot run, not as a missing one."""

from __future__ import annotations

from debias_workbench.pipeline.datasets import get_family
from debias_workbench.training.methods import spec


def missing_capabilities(method: str, family: str) -> list[str]:
    """The capabilities registered method `method` requires that dataset family `family` does not offer."""
    offered = get_family(family).offers
    return [need for need in spec(method).requires if need not in offered]


def applicability(method: str, family: str) -> tuple[bool, str]:
    """(True, "") where `method` can run on `family`'s datasets, else (False, the reason naming both and
    each missing capability, with what the family does offer)."""
    missing = missing_capabilities(method, family)
    if not missing:
        return True, ""
    offered = sorted(get_family(family).offers)
    return False, (
        f"method {method!r} needs {', '.join(missing)}, which dataset family {family!r} does not offer "
        f"(it offers: {', '.join(offered) if offered else 'nothing beyond images and labels'})"
    )
