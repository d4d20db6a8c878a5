"""ImageNet-9 Background Challenge: source -> segmented intermediate store -> 8 variants."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..segment_stage import run_segment_stage
from ..sources import list_source_items
from ..sources.synthetic import make_synthetic_in9
from ..store import atomic_path
from ..variant_stage import run_variant_stage
from .base import DatasetFamily


class In9Family(DatasetFamily):
    name = "in9"

    def variants(self, ds_cfg: dict[str, Any]) -> list[str]:
        return list(ds_cfg["variants"])

    def run_step(self, step: str, ds_cfg: dict[str, Any], seed: int, out: Path, inputs: list[Path],
                 workers: int, variant: str | None) -> None:
        if step == "source":
            with atomic_path(out) as tmp:
                make_synthetic_in9(tmp, ds_cfg["source"]["synthetic"], ds_cfg["classes"], seed)
        elif step == "segment":
            synthetic_root = inputs[0] if inputs else None
            items = list_source_items(ds_cfg["source"], ds_cfg["classes"], synthetic_root)
            run_segment_stage(items, ds_cfg, seed, out, out.parent / "segmentation_quality.jsonl",
                              out.parent / "segmented.manifest.json", workers)
        elif step == "variant":
            seg_store, seg_manifest = inputs
            run_variant_stage(seg_store, seg_manifest, variant, ds_cfg, seed, out,
                              out.parent / f"{variant}.manifest.json", workers, self.name)
        else:
            raise ValueError(step)
