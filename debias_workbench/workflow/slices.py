"""Each job's config slice: exactly the part of the resolved config its outputs depend on.

A job reads its slice from a JSON file whose name is the slice's hash
(`<results>/configs/<kind>/<hash>.json`, written by the `job_config` rule before the job runs, so
that parsing the workflow, `snakemake -n` included, writes nothing). Snakemake reruns a job
when the set of its input files changes, so a config edit reruns exactly the jobs whose slice
it changes: a report-only key reruns the report; one experiment's optimiser reruns that
experiment's training and what reads its models. Reverting an edit points back at the old file,
which is older than the outputs made with it, so nothing reruns needlessly.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from debias_workbench.core.atomic import write_text_atomic
from debias_workbench.core.provenance import job_config_text, text_digest
from debias_workbench.pipeline.datasets import FAMILIES, get_family
from debias_workbench.training.applicability import aligned_stores
from debias_workbench.training.methods import spec
from debias_workbench.training.run_config import RunConfig

from . import paper_hooks
from .config import scoring
from .lookup import dataset_family, deep_merge

#: training keys that change how fast a run goes or where its curves are also shown, not what it computes
SPEED_ONLY_TRAINING_KEYS = ("threads", "trackers", "runs_per_gpu")


def run_config(config: dict[str, Any], experiment: str, seed: int) -> RunConfig:
    """A training run's identity: its merged training config, its method and resolved
    `method_args`, its dataset and train variant, its seed (not its label), and what its
    declaration adds: row `tags` and the monitors `curves` / `model_selection` (scored during
    training at the evaluation batch size)."""
    exp = config["experiments"][experiment]
    training = deep_merge(config["training"], exp.get("training", {}))
    for key in SPEED_ONLY_TRAINING_KEYS:
        training.pop(key, None)
    declared = spec(exp["method"])
    aligned = aligned_variants(config, exp["method"], exp["dataset"], exp["train_variant"])
    out: RunConfig = {
        "experiment": experiment,
        "seed": seed,
        "method": exp["method"],
        "method_args": {**declared.identity_defaults, **exp.get("method_args", {})},
        "training": training,
        "dataset": exp["dataset"],
        "dataset_config": dataset_section(config, exp["dataset"], [exp["train_variant"], *aligned.values()]),
        "train_variant": exp["train_variant"],
        "aligned_variants": aligned,
    }
    if declared.revision:  # absent at 0: a method's runs keep their hash until a fix of its code
        out["method_revision"] = declared.revision
    if "tags" in exp:  # absent (a run declared on its own): its hash stays what it was before tags existed
        out["tags"] = dict(exp["tags"])
    for monitor in ("curves", "model_selection"):
        if monitor in exp:
            out[monitor] = {**exp[monitor], "batch_size": config["evaluation"]["batch_size"]}
    return out


def aligned_variants(config: dict[str, Any], method: str, dataset: str, train_variant: str) -> dict[str, str]:
    """{field: the variant store it is read from} of `method`'s aligned variants on `dataset`'s `train_variant`:
    the store its family builds row-aligned with that train split (`DatasetFamily.aligned_store`), else the
    declared variant's own name (a config check refuses such a run first: `training.applicability`)."""
    stores = aligned_stores(method, dataset_family(config, dataset), config["datasets"][dataset], train_variant)
    return {field: stores[variant] or variant for field, variant in spec(method).aligned_variants.items()}


def scoring_config(config: dict[str, Any], experiment: str) -> dict[str, Any]:
    """How `experiment`'s runs are scored (`workflow.config.scoring`): the evaluation settings, the
    dataset its rows are tagged with, and whether it gets the group metrics."""
    dataset, _sets, groups = scoring(config, experiment)
    return {**evaluation_config(config), "dataset": dataset, **({"group_metrics": True} if groups else {})}


def evaluation_config(config: dict[str, Any]) -> dict[str, Any]:
    ev = config["evaluation"]
    limit = {"max_images": ev["max_images"]} if ev.get("max_images") else {}  # absent: real runs keep their hash
    return {"dataset": ev["dataset"], "split": ev["split"], "batch_size": ev["batch_size"], **limit}


def official_evaluation_config(config: dict[str, Any]) -> dict[str, Any]:
    """Scoring on the official Background Challenge test images (`evaluation.official_dataset`)."""
    return {**evaluation_config(config), "dataset": config["evaluation"]["official_dataset"], "split": "val"}


def imagenet_evaluation_config(config: dict[str, Any]) -> dict[str, Any]:
    return {**evaluation_config(config), "imagenet_model": config["evaluation"]["imagenet_model"]}


def analysis_config(config: dict[str, Any], analysis: str) -> dict[str, Any]:
    """The evaluation settings plus the analysis' own keys of `analyses`, as its paper declares them
    (`paper_hooks.analysis_keys`); a section without its `experiments` (the models are the job's inputs)."""
    out: dict[str, Any] = {"evaluation": evaluation_config(config)}
    for key in paper_hooks.analysis_keys(analysis):
        value = config["analyses"][key]
        out[key] = {k: v for k, v in value.items() if k != "experiments"} if isinstance(value, dict) else value
    return out


def dataset_section(config: dict[str, Any], dataset: str, variants: list[str]) -> dict[str, Any]:
    """`dataset`'s config section as jobs about `variants` see it: what its family keeps of it for them
    (`DatasetFamily.job_section`: in9 leaves out its lists of variants and the sections of derived variants
    not among `variants`)."""
    return get_family(dataset_family(config, dataset)).job_section(config["datasets"][dataset], variants)


def dataset_job_config(config: dict[str, Any], dataset: str, variant: str | None = None) -> dict[str, Any]:
    """What a generation step of `dataset` (about `variant`, if one) depends on: its config section
    (see `dataset_section`), the seed, and its family's `revision` where a fix of the family's code
    moved its stores (absent at 0, so that the other families' stores keep their hash)."""
    job = {
        "dataset": dataset,
        "config": dataset_section(config, dataset, [variant] if variant else []),
        "seed": config["seed"],
    }
    if revision := FAMILIES[dataset_family(config, dataset)].revision_of(config["datasets"][dataset]):
        job["family_revision"] = revision
    return job


def results_only(node: Any) -> Any:
    """A config (or a part of it) without what changes no result: the `cluster` section and the
    speed-only training keys (`SPEED_ONLY_TRAINING_KEYS`, wherever a `training` section sits)."""
    if not isinstance(node, dict):
        return node
    out = {k: results_only(v) for k, v in node.items() if k != "cluster"}
    if isinstance(out.get("training"), dict):
        out["training"] = {k: v for k, v in out["training"].items() if k not in SPEED_ONLY_TRAINING_KEYS}
    return out


def config_provenance(config: dict[str, Any], files: list[str], overrides: dict[str, Any]) -> dict[str, Any]:
    """What a report names as the config it was built from: the config `files` in the order they were
    merged, the `--config` `overrides` and the SHA-256 of the resolved config, each without what
    changes no result (`results_only`), so a report cannot be taken for another config's and a
    cluster's or a thread count's edit does not rebuild it."""
    text = json.dumps(results_only(config), sort_keys=True, default=str)
    return {"files": files, "overrides": results_only(overrides), "sha256": hashlib.sha256(text.encode()).hexdigest()}


class JobConfigs:
    """The config files a workflow's jobs read, named by their content's hash and kept in memory
    until the `job_config` rule (rules/common.smk) writes one for a job that is to run."""

    def __init__(self, results: str) -> None:
        self.results = results
        self.texts: dict[str, str] = {}

    def path(self, kind: str, cfg: dict[str, Any], keep_order: bool = False) -> str:
        """Path of the JSON file of `cfg` under `<results>/configs/<kind>/`, named by its hash.
        `keep_order`: keep the key order (the report lists models in config order)."""
        text = job_config_text(cfg, keep_order)
        path = str(Path(self.results) / "configs" / kind / f"{text_digest(text)}.json")
        self.texts[path] = text
        return path

    def write(self, path: str, log: str, register_all: Callable[[], None]) -> None:
        """Write the file `path` names (atomically), and a line saying so to `log`. A process that
        parsed the workflow for this job alone (a cluster job, a local `run:` job) has named no other
        job's file: `register_all` names every job's first."""
        if path not in self.texts:
            register_all()
        if path not in self.texts:
            raise KeyError(
                f"{path} is no job config of this workflow's config: the workflow writes the configs "
                "of the jobs it plans; ask for a job's output, not its config file"
            )
        write_text_atomic(Path(path), self.texts[path])
        write_text_atomic(Path(log), f"wrote {path}\n")
