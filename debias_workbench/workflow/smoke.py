"""Smoke mode (`smoke: true`): a paper config run end to end at its real shapes, with small counts.

A smoke run takes the same code path as the real one: the architecture, image size, method,
losses, queue sizes, pretrained file, normalisation and augmentation stay as configured. Only
counts shrink: one seed; one epoch of at most `STEPS_PER_EPOCH` batch of at most `BATCH` images;
one thread per job; a few images per class from folder sources (where the dataset's family says so); one GrabCut
iteration; short prerequisite artifacts, pre-training phases and probes (each method argument's `x-smoke` in its spec);
the first `EVAL_IMAGES` images of each test store; one sweep value besides the base; grids on their figure
variant only. Its results go to `<results>-smoke`, so a smoke run never overwrites (or resumes) a
real run, and the report says on its first line that its numbers are not results.
"""

from __future__ import annotations

import copy
from typing import Any

from debias_workbench.pipeline.datasets import family_name, get_family
from debias_workbench.training.methods import spec as method_spec

from . import paper_hooks

#: the smallest batch every method accepts: the unbiased HSIC estimator needs 4 rows (MoCo's
#: shuffled-BN splits go down to 2 to divide it)
BATCH = 4
STEPS_PER_EPOCH = 1
#: images scored per test store (a 224-px ResNet-50 scores about 7 images/s on one core)
EVAL_IMAGES = 2
SUFFIX = "-smoke"


def apply_smoke(config: dict[str, Any]) -> dict[str, Any]:
    """`config` with the counts of smoke mode (see the module docstring); unchanged without
    `smoke: true`. Idempotent."""
    if not config.get("smoke"):
        return config
    out = copy.deepcopy(config)
    if not out["results"].rstrip("/").endswith(SUFFIX):
        out["results"] = out["results"].rstrip("/") + SUFFIX
    out["seeds"] = out["seeds"][:1]
    _shrink_training(out["training"])
    for exp in out["experiments"].values():
        _shrink_run(exp)
    for sweep in out.get("sweeps", {}).values():
        _first_seed(sweep)
        base = out["experiments"][sweep["experiment"]]
        own = {**method_spec(base["method"]).defaults, **base.get("method_args", {})}.get(sweep["arg"])
        others = [v for v in sweep["values"] if v != own]
        sweep["values"] = [v for v in sweep["values"] if v == own] + others[:1]
    for grid in out.get("grids", {}).values():
        _first_seed(grid)
        _shrink_training(grid.get("training", {}))
        grid["train_variants"] = [grid.get("figure_variant", grid["train_variants"][0])]
        for part in ("curves", "model_selection"):
            if grid.get(part):
                grid[part]["every_steps"] = 1
        for method in grid["methods"].values():
            _shrink_run(method)
    for dataset in out["datasets"].values():
        _shrink_dataset(dataset)
    for shrink in paper_hooks.smoke_shrinks():  # the papers' own sections (their analyses' counts)
        shrink(out)
    out["evaluation"]["max_images"] = EVAL_IMAGES
    out["report"]["grid_images"] = min(out["report"]["grid_images"], 2)
    return out


def _first_seed(section: dict[str, Any]) -> None:
    if section.get("seeds"):
        section["seeds"] = section["seeds"][:1]


def _shrink_training(training: dict[str, Any]) -> None:
    if "threads" in training:  # two one-thread jobs at a time: a smoke job is mostly start-up, not compute
        training["threads"] = 1
    if "epochs" in training:
        training["epochs"] = 1
    if training.get("iterations"):
        training["iterations"] = STEPS_PER_EPOCH
    if "batch_size" in training:
        training["batch_size"] = min(training["batch_size"], BATCH)
    training["steps_per_epoch"] = STEPS_PER_EPOCH


def _shrink_run(run: dict[str, Any]) -> None:
    """An experiment or grid method: first seed, smoke training counts, smoke method counts (each method
    argument's `x-smoke` in its spec; set explicitly where the method's defaults would otherwise apply)."""
    _first_seed(run)
    _shrink_training(run.setdefault("training", {}))
    declared = method_spec(run["method"])
    args = {**declared.defaults, **run.get("method_args", {})}
    counts = {k: declared.smoke_value(k, args[k]) for k in declared.smoke_counts}
    if counts:
        run["method_args"] = {**run.get("method_args", {}), **counts}


def _shrink_dataset(dataset: dict[str, Any]) -> None:
    """The dataset's section as its family shrinks it for smoke mode (`DatasetFamily.smoke_section`)."""
    get_family(family_name(dataset)).smoke_section(dataset)
