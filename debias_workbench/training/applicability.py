"""Whether a method can run on a dataset family, declared on both sides, never guessed: a method's
`requires` (`training.methods.spec.MethodSpec`: the capabilities it `needs` and the variants it reads
row-aligned with its training images) against the family's `offers` ({capability: from what},
`pipeline.datasets.base.DatasetFamily`). A method that needs masked backgrounds is refused on a family
that builds none, and the reason names the method, the family and what is missing, so that a table of
every method on every benchmark shows such a cell as one that cannot run, not as a missing one.

Given a dataset's config and its train variant, a variant the method reads row-aligned must also be one
the family builds row-aligned with that train variant's train split (`DatasetFamily.aligned_store`): a
store of another train variant's rows would be read misaligned, so the method is refused there too, with
the family's word on which train variant or setting would offer it (`DatasetFamily.unaligned_reason`)."""

from __future__ import annotations

from typing import Any

from debias_workbench.pipeline.datasets import get_family
from debias_workbench.training.methods import spec


def missing_capabilities(
    method: str,
    family: str,
    ds_cfg: dict[str, Any] | None = None,
    train_variant: str | None = None,
    method_args: dict[str, Any] | None = None,
) -> list[str]:
    """The capabilities registered method `method` requires (at `method_args`: `MethodSpec.requires_for`) that
    dataset family `family` does not offer (`DatasetFamily.capabilities`); with `ds_cfg` and `train_variant`,
    also each variant it reads row-aligned that the family builds for none of `train_variant`'s rows
    (`aligned_stores`)."""
    offered = get_family(family).capabilities()
    missing = [need for need in spec(method).requires_for(method_args or {}) if need not in offered]
    if ds_cfg is not None and train_variant is not None:
        stores = aligned_stores(method, family, ds_cfg, train_variant)
        missing += [need for need, store in stores.items() if store is None and need not in missing]
    return missing


def aligned_stores(method: str, family: str, ds_cfg: dict[str, Any], train_variant: str) -> dict[str, str | None]:
    """{variant the method reads row-aligned: the store of it aligned with `train_variant` (None: none)}."""
    fam = get_family(family)
    return {need: fam.aligned_store(ds_cfg, need, train_variant) for need in spec(method).aligned_variants.values()}


def applicability(
    method: str,
    family: str,
    ds_cfg: dict[str, Any] | None = None,
    train_variant: str | None = None,
    dataset: str | None = None,
    method_args: dict[str, Any] | None = None,
) -> tuple[bool, str]:
    """(True, "") where `method` (at `method_args`) can run on `family`'s datasets (with `ds_cfg` and
    `train_variant`: on that dataset config's `train_variant`), else (False, the reason naming the method, the
    family, the dataset and train variant where given, each missing capability, and what would offer it)."""
    missing = missing_capabilities(method, family, ds_cfg, train_variant, method_args)
    if not missing:
        return True, ""
    fam = get_family(family)
    offered = sorted(fam.capabilities())
    where = ""
    if train_variant is not None:
        where = f" for train variant {train_variant!r}" + (f" of dataset {dataset!r}" if dataset else "")
    hints = []
    if ds_cfg is not None and train_variant is not None:
        hints = [hint for need in missing if (hint := fam.unaligned_reason(ds_cfg, need, train_variant))]
    return False, (
        f"method {method!r} needs {', '.join(missing)}, which dataset family {family!r} does not offer{where} "
        f"(it offers: {', '.join(offered) if offered else 'nothing beyond images and labels'})"
        + "".join(f"; {hint}" for hint in hints)
    )
