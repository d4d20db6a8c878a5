"""ImageNet-9 Background Challenge: source -> listing -> segmented shards -> intermediate store
-> 8 variants (and the derived ones, and the background-biased `bg_conflict_<p>` variants)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..derived_stage import DERIVED, derived_gather, derived_shard, run_derived_stage
from ..segment_stage import gather_shards, run_segment_stage, segment_shard, shard_items
from ..sources import list_source_items
from ..sources.listing import read_listing, write_listing
from ..sources.synthetic import make_synthetic_in9
from ..store import atomic_path
from ..variant_stage import run_variant_stage
from ..variants import BG_CONFLICT, bg_conflict_variants
from .base import DatasetFamily


class In9Family(DatasetFamily):
    name = "in9"

    def variants(self, ds_cfg: dict[str, Any]) -> list[str]:
        return list(ds_cfg["variants"]) + bg_conflict_variants(ds_cfg.get("bg_conflict_percents", []))

    def test_sets(self, ds_cfg: dict[str, Any], train_variant: str) -> dict[str, str]:
        """A background-biased train variant: "valid" (its val split, biased alike) and "unbiased"
        (Mixed-Rand: backgrounds independent of the class); otherwise every variant."""
        if train_variant.startswith(BG_CONFLICT):
            return {"valid": train_variant, "unbiased": "mixed_rand"}
        return {v: v for v in self.variants(ds_cfg)}

    def run_step(self, step: str, ds_cfg: dict[str, Any], seed: int, out: Path, inputs: list[Path],
                 workers: int = 1, variant: str | None = None, shard: int | None = None) -> None:
        """Steps: `source` (the synthetic set), `list` (inputs: the synthetic folder, if any),
        `segment-shard` (inputs: the listing), `segment-gather` (inputs: the listing, then every
        shard in order), `segment` (list + all shards + gather in one process) and `variant`
        (inputs: the segmented store and its manifest)."""
        quality, manifest = out.parent / "segmentation_quality.jsonl", out.parent / "segmented.manifest.json"
        if step == "source":
            with atomic_path(out) as tmp:
                make_synthetic_in9(tmp, ds_cfg["source"]["synthetic"], ds_cfg["classes"], seed)
        elif step == "list":
            write_listing(list_source_items(ds_cfg["source"], ds_cfg["classes"], inputs[0] if inputs else None), out)
        elif step == "segment-shard":
            segment_shard(shard_items(read_listing(inputs[0]), ds_cfg, shard), ds_cfg, seed, out)
        elif step == "segment-gather":
            gather_shards(read_listing(inputs[0]), inputs[1:], ds_cfg, seed, out, quality, manifest)
        elif step == "segment":
            items = list_source_items(ds_cfg["source"], ds_cfg["classes"], inputs[0] if inputs else None)
            run_segment_stage(items, ds_cfg, seed, out, quality, manifest, workers)
        elif step == "variant" and variant in DERIVED:
            seg_store, seg_manifest = inputs
            run_derived_stage(variant, seg_store, seg_manifest, ds_cfg, seed, out,
                              out.parent / f"{variant}.manifest.json", workers)
        elif step == "variant":
            seg_store, seg_manifest = inputs
            run_variant_stage(seg_store, seg_manifest, variant, ds_cfg, seed, out,
                              out.parent / f"{variant}.manifest.json", workers, self.name)
        elif step == "derived-shard":
            derived_shard(variant, inputs[0], ds_cfg, seed, shard, out)
        elif step == "derived-gather":
            derived_gather(variant, inputs[0], inputs[1], inputs[2:], ds_cfg, seed, out,
                           out.parent / f"{variant}.manifest.json")
        else:
            raise ValueError(step)
