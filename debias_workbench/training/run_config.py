"""The job configs that cross from the workflow to training, typed where they cross: a training run's config
(`RunConfig`), what `workflow.slices.run_config` writes and the trainer, the cost model, the trackers and a method's
prerequisites read; a training job's runs (`TrainJobConfig`); a scoring job's (`EvaluationConfig`). Every key is
part of the job's identity (its hash): a key absent from a job is left out, not written as a default, so that jobs
made before it existed keep their hash."""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict


class RunConfig(TypedDict):
    """One run (seed) of an experiment: its method and resolved `method_args`, its merged `training` section, its
    dataset's section and the variant stores it reads; a prerequisite's builder makes one of the first five keys
    alone (trained on the store it is given, with no dataset section of its own)."""

    experiment: str
    seed: int
    method: str
    method_args: dict[str, Any]
    training: dict[str, Any]
    dataset: NotRequired[str]
    dataset_config: NotRequired[dict[str, Any]]
    train_variant: NotRequired[str]
    #: {method field: the variant store it reads row-aligned with the train split}
    aligned_variants: NotRequired[dict[str, str]]
    #: the method's code revision (absent at 0)
    method_revision: NotRequired[int]
    #: the row tags of a grid's or sweep's run (absent for a run declared on its own)
    tags: NotRequired[dict[str, Any]]
    #: monitors scored during training, each with the evaluation batch size
    curves: NotRequired[dict[str, Any]]
    model_selection: NotRequired[dict[str, Any]]


class TrainJobConfig(TypedDict):
    """A training job's config: the runs of its pack, trained one after the other (or several at once)."""

    runs: list[RunConfig]


class EvaluationConfig(TypedDict):
    """How a job scores trained models (`workflow.slices.scoring_config` and its kin): the dataset its rows are
    tagged with, the split and batch size of the test sets; a key absent from a job is left out (its hash)."""

    dataset: str
    split: str
    batch_size: int
    #: the first images of each test set only (smoke and demo checks)
    max_images: NotRequired[int]
    #: accuracy per (class, bias) cell and the worst group's, where the family declares groups
    group_metrics: NotRequired[bool]
    #: the ImageNet model's section (the ImageNet-trained rows), for its own job
    imagenet_model: NotRequired[dict[str, Any]]
