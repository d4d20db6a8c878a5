"""A training run's config: what `workflow.slices.run_config` writes into a run's job config and the trainer, the cost
model, the trackers and a method's prerequisites read. Every key is part of the run's identity (its hash): a key
absent from a run is left out, not written as a default, so that runs made before it existed keep their hash."""

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
