from __future__ import annotations

from pathlib import Path
from typing import Any


class DatasetFamily:
    """A family of dataset variants built by the workflow (e.g. the IN-9 Background Challenge).

    `variants(cfg)` names the stores `results/datasets/<family>/<variant>.zarr`;
    `run_step` runs one generation step (the rules in `rules/<family>.smk` call it).
    """

    name: str

    def variants(self, ds_cfg: dict[str, Any]) -> list[str]:
        raise NotImplementedError

    def test_sets(self, ds_cfg: dict[str, Any], train_variant: str) -> dict[str, str]:
        """{test set name: variant} a model trained on `train_variant` is evaluated on (val split)."""
        return {v: v for v in self.variants(ds_cfg)}

    def run_step(self, step: str, ds_cfg: dict[str, Any], seed: int, out: Path, inputs: list[Path],
                 workers: int = 1, variant: str | None = None, shard: int | None = None) -> None:
        raise NotImplementedError
