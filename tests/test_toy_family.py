"""A dataset family plugs in (docs/architecture.md, "Add a dataset family"): a toy family outside the package,
its module and its config section beside it (tests/toy_family/) and one registry line here, reaches the
config check, its generated stores, a trained run scored on its test sets and `workbench plan`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import yaml
import zarr

from debias_workbench.pipeline import datasets
from debias_workbench.workflow import config as config_module
from debias_workbench.workflow import protocol, schema, user_paths

from .toy_family.stripes import BIASED, UNBIASED, StripesFamily

#: the toy dataset's section: two classes of 8 images a split, 8 px
SECTION = {"family": StripesFamily.name, "images_per_class": 8, "conflict_percent": 25, "image_size": 8,
           "chunk_images": 64}
#: one tiny ERM run on it: a few CPU steps
EXPERIMENT = {"method": "erm", "dataset": "toy", "train_variant": BIASED, "label": "Toy ERM", "seeds": [0],
              "training": {"arch": "small_cnn", "small_cnn_channels": [4, 4], "epochs": 2, "batch_size": 4}}
#: what a process builds once from the registered families (the merged schema, its validators, the code rules)
REGISTRY_CACHES = (schema._load, config_module._validator, user_paths._unread_validator, user_paths._validator,
                   protocol.code_rules)


@pytest.fixture
def toy_family(monkeypatch) -> Iterator[str]:
    """The family's one registry line; the schema and what is built from it are read anew with it, and after."""
    monkeypatch.setitem(datasets.REGISTRY, StripesFamily.name, "tests.toy_family.stripes:StripesFamily")
    for cached in REGISTRY_CACHES:
        cached.cache_clear()
    yield StripesFamily.name
    for cached in REGISTRY_CACHES:
        cached.cache_clear()


def _toy_config(tmp_path: Path, **experiment) -> Path:
    path = tmp_path / "toy.yaml"
    toy = {"datasets": {"toy": SECTION}, "experiments": {"toy_erm": {**EXPERIMENT, **experiment}}}
    path.write_text(yaml.safe_dump(toy))
    return path


def test_the_config_check_reads_a_registered_familys_section_and_rules(toy_family, tmp_path):
    """Its section's schema (`stripes.yaml`, merged into the workflow's) accepts the toy section and refuses a bad
    value by its key; its `train_variant_problem` refuses training on its test set; a warm job server imports its
    module up front (`family_modules`)."""
    from debias_workbench.workflow.config import ConfigError, resolve_config
    from debias_workbench.workflow.plan import load_config

    config = resolve_config(load_config([_toy_config(tmp_path)]))
    assert config["datasets"]["toy"]["family"] == toy_family and "toy_erm" in config["experiments"]
    bad = load_config([_toy_config(tmp_path)])
    bad["datasets"]["toy"]["conflict_percent"] = 150
    with pytest.raises(ConfigError, match=r"datasets\.toy\.conflict_percent: 150 is greater than the maximum of 100"):
        resolve_config(bad)
    with pytest.raises(ConfigError, match=r"experiments\.toy_erm\.train_variant: 'unbiased' holds a val split only"):
        resolve_config(load_config([_toy_config(tmp_path, train_variant=UNBIASED)]))
    assert "tests.toy_family.stripes" in datasets.family_modules()


def test_a_toy_family_reaches_its_stores_a_trained_run_its_scores_and_the_plan(toy_family, tmp_path):
    """`workbench generate variant` builds each store (fingerprinted: `workbench verify`), a run trains on its
    train variant and is scored on the test sets the family declares, with the group metrics it asks for, and
    `workbench plan` lists its generation, training and scoring jobs, each costed."""
    from debias_workbench.cli import main as workbench
    from debias_workbench.training.evaluation import evaluate_run
    from debias_workbench.training.trainer import train
    from debias_workbench.workflow.config import resolve_config, scoring
    from debias_workbench.workflow.lookup import dataset_variants
    from debias_workbench.workflow.plan import load_config, plan
    from debias_workbench.workflow.slices import dataset_job_config, run_config, scoring_config

    toy = _toy_config(tmp_path)
    config = resolve_config(load_config([toy]))
    stores = {}
    for variant in dataset_variants(config, "toy"):
        job = tmp_path / f"{variant}.json"
        job.write_text(json.dumps(dataset_job_config(config, "toy", variant)))
        stores[variant] = tmp_path / "datasets" / "toy" / f"{variant}.zarr"
        command = ["generate", "variant", "--family", toy_family, "--config", str(job), "--variant", variant]
        assert workbench([*command, "--out", str(stores[variant])]) == 0
    assert sorted(stores) == [BIASED, UNBIASED] and workbench(["verify", *map(str, stores.values())]) == 0
    train_split = zarr.open_group(str(stores[BIASED]), mode="r")["train"]
    labels, colours = train_split["labels"][:], train_split["bias_labels"][:]
    assert np.bincount(labels).tolist() == [8, 8] and [int((colours[labels == y] != y).sum()) for y in (0, 1)] == [2, 2]

    model = train(run_config(config, "toy_erm", 0), stores[BIASED], tmp_path / "run")
    dataset, sets, groups = scoring(config, "toy_erm")
    assert (dataset, sets, groups) == ("toy", {"valid": BIASED, UNBIASED: UNBIASED}, True)
    rows = evaluate_run(model, scoring_config(config, "toy_erm"), {name: stores[v] for name, v in sets.items()})
    scored = {(r["variant"], r["metric"]): r["n"] for r in rows}
    assert scored[("valid", "accuracy")] == scored[(UNBIASED, "accuracy")] == 16
    assert scored[(UNBIASED, "conflicting_accuracy")] == 8  # half of each class wears the other's colour
    assert {r["dataset"] for r in rows} == {"toy"} and {r["experiment"] for r in rows} == {"toy_erm"}

    jobs = plan([toy]).jobs
    generation = [j for j in jobs if j.rule == "dataset_variant" and j.target.startswith("toy/")]
    assert sorted(j.target for j in generation) == ["toy/biased", "toy/unbiased"]
    training = [j for j in jobs if j.rule.startswith("train") and j.target == "toy_erm seed 0"]
    scoring_jobs = [j for j in jobs if j.rule.startswith("evaluate") and j.target == "toy_erm"]
    assert len(training) == len(scoring_jobs) == 1
    assert all(j.estimate_minutes > 0 for j in generation + training + scoring_jobs)
