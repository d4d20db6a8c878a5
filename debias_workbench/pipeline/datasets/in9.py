"""ImageNet-9 Background Challenge: source -> listing -> segmented shards -> intermediate store
-> 8 variants (and the derived ones, and the background-biased `bg_conflict_<p>` variants).

The family also builds other ImageNet subsets the same way (ImageNet-100, source
`imagenet_subset`), and the test sets of their classes read from the user's folders as released
(`external`: ImageNet-Sketch, ImageNet-R; val split only)."""

from __future__ import annotations

from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from debias_workbench.core.atomic import atomic_path
from debias_workbench.core.errors import PipelineError

from ..derived_stage import DERIVED, derived_gather, derived_job, run_derived_stage
from ..imageio import TrainPhotos
from ..segment_stage import gather_shards, job_items, run_segment_stage, segment_jobs, segment_shard
from ..shards import ALL_SPLITS, expected_splits, images_in, job_blocks
from ..sources import list_source_items
from ..sources.listing import read_listing, write_listing
from ..sources.synthetic import make_synthetic_in9
from ..variant_stage import run_variant_stage
from ..variants import BG_CONFLICT, EXTERNAL, HELDOUT_FRACTION, bg_conflict_variants
from . import in9_config
from .base import (
    BenchmarkMetric,
    BiasFreeReference,
    CapabilityCheck,
    DatasetFamily,
    DerivedMetric,
    GenerationJob,
    StepJob,
)
from .bg_challenge import build_external


class In9Family(DatasetFamily):
    name = "in9"
    licence = (
        "ImageNet photographs (ILSVRC 2012) and the Background Challenge's boxes and method (Xiao et al. "
        "2021): ImageNet's terms of access apply, non-commercial research and educational use only; with a "
        "`synthetic` or `folder` source, the terms of those images"
    )
    #: the background gap of the Background Challenge (Xiao et al., "Noise or Signal: The Role of Image Backgrounds
    #: in Object Recognition", arXiv 2020, ICLR 2021): BG-GAP = acc(Mixed-Same) - acc(Mixed-Rand), per seed: the
    #: points of accuracy a background of the object's own class gains (CLAD's Table 2: its fairest measure of the bias)
    BG_GAP = DerivedMetric("bg_gap", "mixed_same", "mixed_rand", "BG-Gap ↓")
    derived_metrics = (BG_GAP,)
    #: the Background Challenge's columns (Xiao et al.; CLAD's Table 2)
    headline = ("original", "only_fg", "mixed_rand", "mixed_same", "only_bg_t", BG_GAP.column)
    column_titles = {
        "original": "Original ↑",
        "only_fg": "Only-FG ↑",
        "mixed_rand": "Mixed-Rand ↑",
        "mixed_same": "Mixed-Same ↑",
        "only_bg_t": "Only-BG-T ↓",
        BG_GAP.column: BG_GAP.title,
    }
    #: the texture-vs-shape decision share on Stylized IN-9's cue-conflict images (Geirhos et al. 2019), a value per
    #: run counted over the images classified as the shape or the texture class
    SHAPE_BIAS_METRIC = "shape_bias"
    counted_metrics = (SHAPE_BIAS_METRIC,)
    val_split = "backgrounds as biased as the train split"
    evaluated = True
    whole_variants = False  # listing, segmentation shards and gathers in rules of its own:
    rule_files = ("in9_common.smk", "in9_data.smk", "in9_derived.smk")
    offers = {
        "only_bg_t": "each image's background, the foreground's box filled with tiles of it, from the segmentation "
        "mask (ONLY_BG_T), row-aligned with the training images",
        "stylized": "each image's AdaIN-stylized copy (Stylized IN-9), row-aligned with the training images",
        "texture": "each image's synthesized texture (IN-9-Texture), row-aligned with the training images",
        "biased_network": "a small-receptive-field (local texture) net as ReBias's G: BagNet18 (receptive field 43 "
        "px) on 224-px images as on 9-class ImageNet, simple_cnn3 (3x3 layers: 2n + 1 px for n of them) on the 32-px "
        "synthetic images",
    }
    #: the accuracy without background cues (Mixed-Rand), which a smaller BG-GAP may have been bought with
    MIXED_RAND = BenchmarkMetric("Mixed-Rand accuracy", "mixed_rand")
    #: the numbers of the Background Challenge (Xiao et al.): the gap (lower is better only where Mixed-Rand is not
    #: worse: a model that gets both backgrounds' images wrong has no gap) and the accuracy without background cues
    BACKGROUND_METRICS = (
        BenchmarkMetric(
            "BG-GAP (Mixed-Same − Mixed-Rand)",
            BG_GAP.column,
            higher_is_better=False,
            trades_against=MIXED_RAND,
            reads=BG_GAP.reads,
        ),
        MIXED_RAND,
    )
    #: a background-biased train variant (Park et al.'s Waterbirds analogue): its unbiased set is Mixed-Rand, judged as
    #: the conflict-ratio families; not by its worst group: 9 classes x 9 backgrounds leave the synthetic val split
    #: 5-6 images a group, and every model of the matrix's first run scored 0 % on some group
    CONFLICT_METRICS = (
        BenchmarkMetric("unbiased accuracy (Mixed-Rand)", "unbiased"),
        BenchmarkMetric("bias-conflicting accuracy (Mixed-Rand)", "unbiased", "conflicting_accuracy"),
    )
    #: training images of the sources whose size the config does not give (the Background
    #: Challenge's IN-9 train split; ImageNet's 370 IN-9 classes; ImageNet-100's train split)
    FOLDER_TRAIN_IMAGES = {"in9_folder": 45_405, "imagenet": 481_000, "imagenet_subset": 126_689}

    conditional_code_rules = in9_config.CONDITIONAL_CODE_RULES

    def smoke_section(self, ds_cfg: dict[str, Any]) -> None:
        in9_config.smoke_section(ds_cfg)

    def train_photos(self, ds_cfg: dict[str, Any]) -> TrainPhotos | None:
        return TrainPhotos.of(ds_cfg)

    def section_problems(self, ds_cfg: dict[str, Any], where: str, variants: list[str]) -> list[str]:
        return in9_config.section_problems(ds_cfg, where, variants)

    def train_variant_problem(self, ds_cfg: dict[str, Any], variant: str) -> str:
        return in9_config.train_variant_problem(variant)

    def aligned_variant_problem(self, ds_cfg: dict[str, Any], where: str, variant: str) -> str:
        return in9_config.aligned_variant_problem(ds_cfg, where, variant)

    def expected_images(self, ds_cfg: dict[str, Any], split: str) -> int:
        source = ds_cfg["source"]
        if source["kind"] == "synthetic":
            syn = source["synthetic"]
            return len(ds_cfg["classes"]) * syn["train_per_class" if split == "train" else "val_per_class"]
        images = self.FOLDER_TRAIN_IMAGES[source["kind"]]
        return images if split == "train" else images // 10

    def variants(self, ds_cfg: dict[str, Any]) -> list[str]:
        return (
            list(ds_cfg["variants"])
            + bg_conflict_variants(ds_cfg.get("bg_conflict_percents", []))
            + external_variants(ds_cfg)
        )

    #: the stores built row-aligned with the training images (`offers`): only `original`'s, each the variant of
    #: its capability's name (every variant is written in the segmented store's order; a `bg_conflict_<p>` or
    #: Mixed-Rand train split holds other images, or the same in another order)
    ALIGNED_STORES = ("only_bg_t", "stylized", "texture")
    ALIGNED_TRAIN_VARIANT = "original"

    def aligned_store(self, ds_cfg: dict[str, Any], capability: str, train_variant: str) -> str | None:
        """`capability`'s own variant, for train variant `original` and where the dataset builds it with a
        train split (Stylized IN-9 and IN-9-Texture may be built as test sets only: `splits: [val]`)."""
        aligned = capability in self.ALIGNED_STORES and train_variant == self.ALIGNED_TRAIN_VARIANT
        return capability if aligned and self.builds_split(ds_cfg, capability, "train") else None

    def builds_split(self, ds_cfg: dict[str, Any], variant: str, split: str) -> bool:
        """Whether the dataset builds `variant` with its `split` (a derived variant: its section's `splits`)."""
        if variant not in self.variants(ds_cfg):
            return False
        return split in ds_cfg.get(variant, {}).get("splits", ()) if variant in DERIVED else True

    def unaligned_reason(self, ds_cfg: dict[str, Any], capability: str, train_variant: str) -> str:
        if capability not in self.ALIGNED_STORES:
            return ""
        if train_variant != self.ALIGNED_TRAIN_VARIANT:
            return (
                f"its {capability} store is row-aligned with train variant {self.ALIGNED_TRAIN_VARIANT!r} only; "
                f"train on {self.ALIGNED_TRAIN_VARIANT!r}"
            )
        if capability in self.variants(ds_cfg):
            return f"the dataset builds {capability!r} without its train split; add train to its `{capability}.splits`"
        return f"the dataset does not build variant {capability!r}; add it to the dataset's `variants`"

    def job_section(self, ds_cfg: dict[str, Any], variants: list[str]) -> dict[str, Any]:
        """Without the list of variants and of background-biased percentages (no generation step reads
        them: a `bg_conflict_<p>` job reads p from its name) and without the sections of derived variants
        not among `variants`, so adding a variant or editing Stylized IN-9's settings reruns only the jobs
        that make or read those stores."""
        return {
            k: v
            for k, v in ds_cfg.items()
            if k not in ("variants", "bg_conflict_percents", "external") and (k not in DERIVED or k in variants)
        }

    def generation_jobs(
        self, ds_cfg: dict[str, Any], dataset: str, min_images: Callable[[str], int] | None = None
    ) -> list[GenerationJob]:
        """rules/in9_data.smk's and in9_derived.smk's jobs: the source (synthetic), the listing, the
        segmentation's jobs and gather, then per variant its store, or a derived one's jobs and gather; the
        jobs of a step (`shards.job_blocks`, at least `min_images(step)` images each) over the items the source
        is expected to hold (the workflow's: over the listing's)."""
        fewest = min_images or (lambda _step: 1)
        items = expected_splits({split: self.expected_images(ds_cfg, split) for split in ALL_SPLITS})
        source = ("in9_synthetic_source",) if ds_cfg["source"]["kind"] == "synthetic" else ()
        jobs = [GenerationJob(rule, dataset) for rule in (*source, "in9_list", "in9_segment")]
        jobs += _shard_jobs(ds_cfg, items, "in9_segment_shard", dataset, ALL_SPLITS, fewest("segment"))
        for variant in self.variants(ds_cfg):
            if variant in DERIVED and variant in ds_cfg:
                splits, target = ds_cfg[variant]["splits"], f"{dataset}/{variant}"
                jobs += _shard_jobs(ds_cfg, items, f"in9_{variant}_shard", target, splits, fewest(variant), variant)
                jobs.append(GenerationJob("in9_derived", f"{dataset}/{variant}"))
            else:
                jobs.append(GenerationJob("in9_variant", f"{dataset}/{variant}", parallel=True))
        return jobs

    #: Mixed-Rand with a tenth of each class's training images held out as its val split (`variants.HELDOUT`)
    BIAS_FREE = "mixed_rand_heldout"
    held_out_variants = (BIAS_FREE,)

    def test_sets(self, ds_cfg: dict[str, Any], train_variant: str) -> dict[str, str]:
        """A background-biased train variant: "valid" (its val split, biased alike) and "unbiased"
        (Mixed-Rand: backgrounds independent of the class); the held-out Mixed-Rand: its own val split only;
        otherwise every variant but that one (its val images are other variants' training images)."""
        if train_variant.startswith(BG_CONFLICT):
            return {"valid": train_variant, "unbiased": "mixed_rand"}
        if train_variant in self.held_out_variants:
            return {train_variant: train_variant}
        return {v: v for v in self.variants(ds_cfg) if v not in self.held_out_variants}

    def bias_free_reference(self, ds_cfg: dict[str, Any], train_variant: str) -> BiasFreeReference | None:
        """Both IN-9 benchmarks: ERM trained on Mixed-Rand (backgrounds independent of the class), decided on
        training images it held out (not the Mixed-Rand test set the comparisons are scored on)."""
        return BiasFreeReference(
            self.BIAS_FREE,
            self.BIAS_FREE,
            f"Mixed-Rand of {HELDOUT_FRACTION:.0%} of each class's training images, held out of its training",
            f"add {self.BIAS_FREE} to the dataset's `variants`",
        )

    def validation_set(self, ds_cfg: dict[str, Any], train_variant: str) -> str | None:
        """None: every IN-9 variant's val split holds the Background Challenge's test photos (ORIGINAL's val rows,
        which every variant is built from; a background-biased variant's "valid" holds the very photos of its
        Mixed-Rand test set), so selecting on it would select on the test images."""
        return None

    def group_metrics(self, ds_cfg: dict[str, Any], train_variant: str) -> bool:
        """The background-biased train variants (Park et al.'s Waterbirds analogue) are scored as the
        conflict-ratio families are; the Background Challenge columns need none."""
        return train_variant.startswith(BG_CONFLICT)

    #: the texture-vs-shape number where Stylized IN-9's cue-conflict images are built (Geirhos et al. 2019)
    #: (a share of the cue-conflict decisions: higher only where the accuracy on ORIGINAL is not worse, since a model
    #: that recognises less can still split its few right answers towards shape)
    SHAPE_BIAS = BenchmarkMetric(
        "shape bias (Stylized IN-9 cue conflict)",
        "stylized",
        SHAPE_BIAS_METRIC,
        trades_against=BenchmarkMetric("ORIGINAL accuracy", "original"),
    )

    def benchmark_metrics(self, ds_cfg: dict[str, Any], train_variant: str) -> tuple[BenchmarkMetric, ...]:
        """Background-biased training: Park et al.'s numbers on Mixed-Rand; otherwise the Background
        Challenge's, and the shape bias where the config builds Stylized IN-9's val split."""
        if train_variant.startswith(BG_CONFLICT):
            return self.CONFLICT_METRICS
        shape = self.builds_split(ds_cfg, "stylized", "val")
        return self.BACKGROUND_METRICS + ((self.SHAPE_BIAS,) if shape else ())

    def capability_check(self, ds_cfg: dict[str, Any], train_variant: str) -> CapabilityCheck | None:
        """ERM's accuracy on Mixed-Rand, where backgrounds carry no class (as the conflict-ratio families:
        `ConflictRatioFamily.capability_check`): its `unbiased` test set when trained background-biased, the
        Background Challenge's own variant otherwise."""
        column = "unbiased" if train_variant.startswith(BG_CONFLICT) else "mixed_rand"
        return CapabilityCheck(BenchmarkMetric(self.MIXED_RAND.title, column), "the classes beyond their backgrounds")

    steps = {
        "source": "make_source",
        "list": "list_items",
        "segment-shard": "segment_one_shard",
        "segment-gather": "gather_segments",
        "segment": "segment_all",
        "variant": "build_variant",
        "derived-shard": "derived_one_shard",
        "derived-gather": "gather_derived",
    }

    def make_source(self, job: StepJob) -> None:
        """The embedded synthetic source folder."""
        with atomic_path(job.out) as tmp:
            make_synthetic_in9(tmp, job.ds_cfg["source"]["synthetic"], job.ds_cfg["classes"], job.seed)

    def list_items(self, job: StepJob) -> None:
        """The listing every shard job shares (inputs: the synthetic folder, if any)."""
        write_listing(list_source_items(job.ds_cfg["source"], job.ds_cfg["classes"], _first(job.inputs)), job.out)

    def segment_one_shard(self, job: StepJob) -> None:
        """One segmentation job: job `shard` of those of at least `min_images` items (inputs: the listing)."""
        assert job.shard is not None  # a shard job's
        items = read_listing(job.inputs[0])
        jobs = segment_jobs(items, job.ds_cfg, job.min_images)
        if not 0 <= job.shard < len(jobs):
            raise PipelineError(f"the listing makes {len(jobs)} segmentation jobs, not job {job.shard}")
        segment_shard(job_items(items, job.ds_cfg, jobs[job.shard]), job.ds_cfg, job.seed, job.out)

    def gather_segments(self, job: StepJob) -> None:
        """The segmented store (inputs: the listing, then every shard in order)."""
        quality, manifest = _segmentation_records(job.out)
        gather_shards(read_listing(job.inputs[0]), job.inputs[1:], job.ds_cfg, job.seed, job.out, quality, manifest)

    def segment_all(self, job: StepJob) -> None:
        """Listing, every shard and the gather in one process (inputs: the synthetic folder, if any)."""
        items = list_source_items(job.ds_cfg["source"], job.ds_cfg["classes"], _first(job.inputs))
        run_segment_stage(items, job.ds_cfg, job.seed, job.out, *_segmentation_records(job.out), job.workers)

    def build_variant(self, job: StepJob) -> None:
        """A variant store (inputs: the segmented store and its manifest; for an `external` variant, its folder)."""
        variant, manifest = job.variant, job.out.parent / f"{job.variant}.manifest.json"
        assert variant is not None  # a variant job's
        if variant in EXTERNAL:
            build_external(variant, job.inputs[0], job.ds_cfg, job.seed, job.out)
            return
        seg_store, seg_manifest = job.inputs
        if variant in DERIVED:
            run_derived_stage(variant, seg_store, seg_manifest, job.ds_cfg, job.seed, job.out, manifest, job.workers)
        else:
            run_variant_stage(
                seg_store, seg_manifest, variant, job.ds_cfg, job.seed, job.out, manifest, job.workers, self.name
            )

    def derived_one_shard(self, job: StepJob) -> None:
        """One job of a derived variant: job `shard` of those of at least `min_images` images (inputs: the
        segmented store)."""
        assert job.variant is not None and job.shard is not None  # a variant's shard job's
        derived_job(job.variant, job.inputs[0], job.ds_cfg, job.seed, job.shard, job.min_images, job.out)

    def gather_derived(self, job: StepJob) -> None:
        """A derived variant's store (inputs: the segmented store, its manifest, then every shard in order)."""
        assert job.variant is not None  # a variant job's
        derived_gather(
            job.variant,
            job.inputs[0],
            job.inputs[1],
            job.inputs[2:],
            job.ds_cfg,
            job.seed,
            job.out,
            job.out.parent / f"{job.variant}.manifest.json",
        )


def _first(inputs: list[Path]) -> Path | None:
    return inputs[0] if inputs else None


def _segmentation_records(out: Path) -> tuple[Path, Path]:
    """The segmentation-quality rows and the manifest written beside the segmented store `out`."""
    return out.parent / "segmentation_quality.jsonl", out.parent / "segmented.manifest.json"


def external_variants(ds_cfg: dict[str, Any]) -> list[str]:
    """The `external` test sets given a folder (ImageNet-Sketch, ImageNet-R), in `EXTERNAL` order."""
    given = ds_cfg.get("external") or {}
    return [name for name in EXTERNAL if given.get(name)]


def _shard_jobs(
    ds_cfg: dict[str, Any],
    items: list[str],
    rule: str,
    target: str,
    splits: Collection[str],
    min_images: int,
    variant: str = "",
) -> list[GenerationJob]:
    """The jobs of a step building `splits` over items whose splits are `items` (`shards.job_blocks`), each with
    the images of those splits it holds; a derived variant's (`variant`) on a GPU for stylization."""
    block = int(ds_cfg["block_images"])
    return [
        GenerationJob(
            rule,
            f"{target} shard {k}",
            "derived_shard" if variant else "segment_shard",
            variant or None,
            gpu=variant == "stylized",
            images=images_in(items, block, splits, blocks),
        )
        for k, blocks in enumerate(job_blocks(items, block, splits, min_images))
    ]
