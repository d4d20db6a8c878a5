from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from ..imageio import TrainPhotos

#: the capability of a val split that holds the training's bias (`DatasetFamily.capabilities`), which a model
#: selected there for having learnt the bias needs (BiasEnsemble's best-validation vote)
BIASED_VAL = "val_holds_bias"
#: the title of the column of a test set named `unbiased` (the bias independent of the label), in the families that
#: build one
UNBIASED_TITLE = "Unbiased ↑"


@dataclass(frozen=True)
class StepJob:
    """One generation step's arguments (`workbench generate STEP`): the dataset's section and seed,
    the output, the inputs in the order the step's rule lists them, and what the step works on: a staged
    family's job `shard` of its step's jobs of at least `min_images` images each (`shards.job_blocks`)."""

    ds_cfg: dict[str, Any]
    seed: int
    out: Path
    inputs: list[Path]
    workers: int = 1
    variant: str | None = None
    shard: int | None = None
    min_images: int = 1


@dataclass(frozen=True)
class GenerationJob:
    """One generation job of a dataset as the family's rules make it (`workbench plan` lists and costs it):
    its `rule`, what it makes (`target`), the work it does (`work`: "pass", a CPU pass over the whole dataset;
    "segment_shard" or "derived_shard", one job of whole blocks holding `images` images of `variant`'s splits:
    `workflow.resources` estimates each), whether it asks for a GPU, and whether its rule runs
    `workflow.resources.variant_threads` worker processes (`parallel`; else one CPU)."""

    rule: str
    target: str
    work: str = "pass"
    variant: str | None = None
    gpu: bool = False
    parallel: bool = False
    images: int = 0  #: a shard job's images of its step's splits (0: a pass over the whole dataset)


@dataclass(frozen=True)
class BenchmarkMetric:
    """A number a benchmark of the family is judged by (the methods x benchmarks table compares each method's
    to ERM's): its `title`, the `column` it is read from (a test set, the eval rows' `variant`, or `bg_gap`,
    Mixed-Same minus Mixed-Rand accuracy per seed, which the report's context derives), the eval rows'
    `metric`, and whether a higher value is better; `trades_against`, where a better value can be bought with a
    worse one (a smaller background gap by a lower accuracy without the background), that accuracy: the table
    calls a method "better" on this number only where it is not worse on that one than its baseline."""

    title: str
    column: str
    metric: str = "accuracy"
    higher_is_better: bool = True
    trades_against: BenchmarkMetric | None = None
    #: the test sets a derived `column` is computed from (BG-GAP: Mixed-Same and Mixed-Rand); empty: the column is one
    reads: tuple[str, ...] = ()

    @property
    def source_sets(self) -> tuple[str, ...]:
        """The test sets this number is read from."""
        return self.reads or (self.column,)


@dataclass(frozen=True)
class DerivedMetric:
    """A number of a run derived from two of its test sets' accuracies, per seed (runs write no row of it: the
    report's context computes it where a run was scored on both): `column` = accuracy on `minuend` minus accuracy
    on `subtrahend`, per image where the two test sets hold the same images row for row; `title`, its table column
    (the arrow: which way is better)."""

    column: str
    minuend: str
    subtrahend: str
    title: str

    @property
    def reads(self) -> tuple[str, str]:
        """The two test sets it is computed from."""
        return self.minuend, self.subtrahend


@dataclass(frozen=True)
class CapabilityCheck:
    """What shows that a benchmark's reference model (ERM) learns the task at all, so that the benchmark
    can tell a working method from a broken one (`report.helpers.capability_line`): the accuracy read as
    `metric` must lie 20 points above chance; `task` says what that accuracy shows ("the digits beyond their
    colour")."""

    metric: BenchmarkMetric
    task: str


@dataclass(frozen=True)
class BiasFreeReference:
    """Where a benchmark's capability is decided (the methods x benchmarks table): ERM of the benchmark's recipe
    trained on `variant`, the family's training variant with the bias balanced away, and scored on its test set
    `test_set`, a split the benchmark's comparisons are not scored on (`split` says what it holds, for the report's
    line); `setting`: how a config makes the dataset build `variant` (for the config check's message)."""

    variant: str
    test_set: str
    split: str
    setting: str


class DatasetFamily:
    """A family of dataset variants built by the workflow (e.g. the IN-9 Background Challenge).

    `variants(cfg)` names the stores `results/datasets/<family>/<variant>.zarr`;
    `run_step` runs one of its generation `steps` (the rules call it: `workbench generate STEP`).
    """

    name: str
    #: the test sets (and metrics derived from them) a results table of this family shows, in order
    headline: tuple[str, ...] = ()
    #: {test set or metric: its table column's title} (the arrow: which way is better); a column without one is
    #: titled by its name
    column_titles: dict[str, str] = {}
    #: the numbers of its runs derived from two test sets' accuracies (the report's context computes them)
    derived_metrics: tuple[DerivedMetric, ...] = ()
    #: eval metrics whose value per run rests on a count of the model's decisions, shown only where a run counts
    #: `report.helpers.MIN_IMAGES` of them (else that count)
    counted_metrics: tuple[str, ...] = ()
    #: what the family's val split (model selection) holds, for the tables' captions
    val_split: str = "as the dataset builds it"
    #: its val split's bias is independent of the label: a model that learnt only the bias scores chance there, so
    #: BiasEnsemble's best-validation vote (`committee_vote: best_valid`) cannot find the bias-amplified checkpoints
    #: (the authors' valid folders hold the training's bias degree); without it, the family offers `BIASED_VAL`
    bias_free_val: bool = False
    #: generation step -> the method that runs it (given a `StepJob`); a family whose variants are each
    #: built whole by one job has the one step `variant`
    steps: dict[str, str] = {"variant": "build_variant"}
    #: each variant store built whole by one job (`workbench generate variant`, rule `dataset_variant` in
    #: rules/whole_variants.smk); False for a family with stages of its own (in9: its `rule_files`)
    whole_variants: bool = True
    #: the rule files under rules/ of its own stages (a family without `whole_variants`), which may name it; the
    #: Snakefile includes them, in order, after rules/common.smk and job_configs.smk (`datasets.rule_files`)
    rule_files: tuple[str, ...] = ()
    #: the terms of the images' source, for a dataset card (`pipeline.export`): whoever hands a variant
    #: on hands on these terms with it
    licence: str = "the terms of the source the images were made from (see the dataset's `source` in its config)"
    #: the family of the Background Challenge evaluation: `evaluation.dataset` names one of its datasets, whose
    #: stores the analyses read, and the runs on its datasets are scored there (`workflow.checks`)
    evaluated: bool = False
    #: its datasets are the released official test images `evaluation.official_dataset` names
    official_test_images: bool = False
    #: {rule: value}: rules fixed in the family's code that no setting chooses and that can move a paper's numbers,
    #: which a paper config's protocol names as `code:<rule>` (`workflow.protocol.code_rules`); each holds for every
    #: run on the family's datasets, so a protocol names each for every run it lists
    code_rules: dict[str, Any] = {}
    #: {rule: value}: such rules that hold only for the runs reading some of its variants or settings (a protocol
    #: may name them; none must)
    conditional_code_rules: dict[str, Any] = {}
    #: the revision of the family's generation code: raised with a change that moves its stores' bytes (a
    #: fix), so that stores made before it are made again (`workflow.slices.dataset_job_config`)
    revision: int = 0
    #: {capability: from what}: what the family offers a method beyond images and labels (a method's `requires`,
    #: `training.methods.spec`): a store built row-aligned with the training images (which store, for which train
    #: variant: `aligned_store`), or `biased_network`, an architecture biased by design towards the family's bias
    #: (ReBias's G)
    offers: dict[str, str] = {}
    #: variants whose val split holds rows held out of their own train split (a bias-free reference's,
    #: `bias_free_reference`): scored only by the runs trained on them, whose training never saw those rows
    held_out_variants: tuple[str, ...] = ()

    @classmethod
    def capabilities(cls) -> dict[str, str]:
        """Its `offers`, and `BIASED_VAL` where its val split holds the training's bias (not `bias_free_val`)."""
        return {**cls.offers, **({} if cls.bias_free_val else {BIASED_VAL: cls.val_split})}

    @classmethod
    def revision_of(cls, ds_cfg: dict[str, Any]) -> int:
        """The revision of the code that builds `ds_cfg`'s stores: `revision`, or more where a fix moved
        the bytes of some configurations only (so that the others' stores keep their hash)."""
        return cls.revision

    @classmethod
    def schema(cls) -> dict[str, Any]:
        """The JSON schema of the family's config section: `<module>.yaml` beside its module."""
        return yaml.safe_load(Path(inspect.getfile(cls)).with_suffix(".yaml").read_text())

    def variants(self, ds_cfg: dict[str, Any]) -> list[str]:
        raise NotImplementedError

    def job_section(self, ds_cfg: dict[str, Any], variants: list[str]) -> dict[str, Any]:
        """The dataset's section as the jobs about `variants` see it (part of their identity,
        `workflow.slices.dataset_section`): the whole section, unless the family leaves out what those
        jobs never read, so that editing it reruns only the jobs that do."""
        return ds_cfg

    def generation_jobs(
        self, ds_cfg: dict[str, Any], dataset: str, min_images: Callable[[str], int] | None = None
    ) -> list[GenerationJob]:
        """The generation jobs of `dataset`, in the order `workbench plan` lists them: one job building each
        variant store whole (rule `dataset_variant`, rules/whole_variants.smk). `min_images` (a staged family's:
        the step, "segment" or a variant, -> the fewest images a job of it takes; None: a job per block) is unused."""
        return [GenerationJob("dataset_variant", f"{dataset}/{v}") for v in self.variants(ds_cfg)]

    def test_sets(self, ds_cfg: dict[str, Any], train_variant: str) -> dict[str, str]:
        """{test set name: variant} a model trained on `train_variant` is evaluated on (val split)."""
        return {v: v for v in self.variants(ds_cfg)}

    def smoke_section(self, ds_cfg: dict[str, Any]) -> None:
        """Shrink the section in place for smoke mode (`workflow.smoke`: the same code path, small counts).
        Default: nothing (the stand-ins of most families are small files already)."""

    def train_photos(self, ds_cfg: dict[str, Any]) -> TrainPhotos | None:
        """The section's training photos (`imageio.TrainPhotos`: a training split of whole photos, from which
        only a method that cuts its views from photos can train); None: its training images are the test
        images' squares. Default: none."""
        return None

    def section_problems(self, ds_cfg: dict[str, Any], where: str, variants: list[str]) -> list[str]:
        """What the config check finds wrong in the dataset's section `where` (its dotted key) that its schema
        cannot say, `variants` the variants it builds; each problem names its key and the fix. Default: none."""
        return []

    def train_variant_problem(self, ds_cfg: dict[str, Any], variant: str) -> str:
        """Why a run cannot train on `variant` (a test set read as released, say); empty where it can."""
        return ""

    def aligned_variant_problem(self, ds_cfg: dict[str, Any], where: str, variant: str) -> str:
        """Why a method cannot read `variant` row-aligned with its training images, as the section `where`
        builds it, beyond `aligned_store` (a setting that leaves the pairing it needs undefined); empty where it
        can."""
        return ""

    def input_paths(self, ds_cfg: dict[str, Any], variant: str) -> list[str]:
        """The user's files and folders a variant's job reads (declared as inputs, so a missing one
        stops the workflow at start, named)."""
        return []

    def aligned_store(self, ds_cfg: dict[str, Any], capability: str, train_variant: str) -> str | None:
        """The variant whose store holds `capability` (one of `offers`) row-aligned with `train_variant`'s train
        split, as `ds_cfg` builds it; None where it offers none for that train variant (a method reading it
        there would read another split's rows: `training.applicability` refuses it). Default: none."""
        return None

    def unaligned_reason(self, ds_cfg: dict[str, Any], capability: str, train_variant: str) -> str:
        """Why `aligned_store` offers no `capability` for `train_variant`, and which setting would (for the
        message that refuses a method there); empty where the family has nothing to say."""
        return ""

    def expected_images(self, ds_cfg: dict[str, Any], split: str) -> int:
        """About how many images a split holds, from the config alone (the cluster's runtime and
        memory requests, `workflow.resources`)."""
        raise NotImplementedError

    def group_metrics(self, ds_cfg: dict[str, Any], train_variant: str) -> bool:
        """Whether a run trained on `train_variant` is also scored per (bias, class) cell, on the
        bias-conflicting images, per class and on the worst group (`training.evaluation.group_metrics`)."""
        return False

    def benchmark_metrics(self, ds_cfg: dict[str, Any], train_variant: str) -> tuple[BenchmarkMetric, ...]:
        """The numbers a run trained on `train_variant` is judged by as a benchmark, the first the main one;
        none for a family that is no training benchmark."""
        return ()

    def capability_check(self, ds_cfg: dict[str, Any], train_variant: str) -> CapabilityCheck | None:
        """How to tell that ERM trained on `train_variant` learns the task at all (the methods x benchmarks
        table judges no method on a benchmark whose ERM does not); None: the family declares no check."""
        return None

    def bias_free_reference(self, ds_cfg: dict[str, Any], train_variant: str) -> BiasFreeReference | None:
        """Where the capability of a benchmark trained on `train_variant` is decided: ERM trained where the bias is
        balanced away, scored on a split the comparisons are not (`BiasFreeReference`); None: the family builds no
        such variant (the table then checks the benchmark's own ERM on its unbiased test set)."""
        return None

    def validation_set(self, ds_cfg: dict[str, Any], train_variant: str) -> str | None:
        """The test set (of `test_sets`) a run trained on `train_variant` is model-selected on by a validation rule
        (`report.model_selection`, "validation"): the train variant's own val split; None where the family has
        none that is not a test set."""
        return None

    def class_count(self, ds_cfg: dict[str, Any]) -> int:
        """The classes a model of the dataset tells apart (chance is 100 / this %)."""
        return len(ds_cfg["classes"])

    def run_step(
        self,
        step: str,
        ds_cfg: dict[str, Any],
        seed: int,
        out: Path,
        inputs: list[Path],
        workers: int = 1,
        variant: str | None = None,
        shard: int | None = None,
        min_images: int = 1,
    ) -> None:
        """Run generation step `step`, one of the family's `steps`."""
        if step not in self.steps:
            raise ValueError(f"dataset family {self.name!r} has no step {step!r}; its steps: {sorted(self.steps)}")
        getattr(self, self.steps[step])(StepJob(ds_cfg, seed, out, list(inputs), workers, variant, shard, min_images))

    def build_variant(self, job: StepJob) -> None:
        """Build the store of `job.variant` at `job.out` (the step `variant`)."""
        raise NotImplementedError

    def known_variant(self, job: StepJob) -> str:
        """`job.variant`, one of the variants the family builds for the job's config, or a ValueError naming them."""
        if job.variant not in (built := self.variants(job.ds_cfg)):
            raise ValueError(f"{self.name} builds only the variants {built}, not {job.variant!r}")
        return job.variant
