"""A registry read without importing what it registers (timm's style): name -> "module.Class" under
one package, the class imported on first access. The methods' and the dataset families' registries
are such maps, so the config layer can list and check names without importing torch."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import Any, Generic, TypeVar

T = TypeVar("T")


def import_entry(entry: str) -> Any:
    """The object an absolute entry "package.module:name" names, its module imported now."""
    module, name = entry.split(":")
    return getattr(importlib.import_module(module), name)


class LazyRegistry(Mapping[str, T], Generic[T]):
    """name -> class of `entries` ({name: "module.Class"} relative to `package`, the module dotted or
    not, or "package.module:Class" for one outside it: a toy entry a test adds)."""

    def __init__(self, package: str, entries: dict[str, str]):
        self.package, self.entries = package, entries

    def __getitem__(self, name: str) -> T:
        return import_entry(self._absolute(name))

    def module_of(self, name: str) -> str:
        """The dotted module `name`'s entry lies in (imported only by `self[name]`)."""
        return self.locate(name)[0]

    def locate(self, name: str) -> tuple[str, str]:
        """`name`'s entry as (dotted module, attribute), the module not imported."""
        module, _, attribute = self._absolute(name).partition(":")
        return module, attribute

    def _absolute(self, name: str) -> str:
        """`name`'s entry as "package.module:Class"."""
        entry = self.entries[name]
        if ":" in entry:
            return entry
        module, _, cls = entry.rpartition(".")  # "module.Class" (or "package.module.Class") under `package`
        return f"{self.package}.{module}:{cls}"

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)
