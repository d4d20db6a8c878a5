"""The config schema accepts the shipped configs and names the key of every bad value."""

import copy
import subprocess
import sys

import pytest
import yaml

from debias_workbench.workflow.config import ConfigError, deep_merge, resolve_config, validate_config

from .conftest import PAPER_CONFIGS, ROOT, workdir

#: every config file shipped in config/ (the schema aside)
SHIPPED_CONFIGS = sorted(p.name for p in (ROOT / "config").glob("*.yaml") if p.name != "schema.yaml")


def test_shipped_configs_are_valid(default_config):
    validate_config(default_config)
    for name in ("imagenet9.yaml", "photos-dev.yaml", "biased_mnist_paper.yaml", "park_real_data.yaml", "park_ablation.yaml",
                 "imagenet100_ssl.yaml"):
        validate_config(deep_merge(default_config, yaml.safe_load((ROOT / "config" / name).read_text())))
    # ImageNet-100's config also goes beside the IN-9 one on one command line
    both = deep_merge(default_config, yaml.safe_load((ROOT / "config" / "imagenet9.yaml").read_text()))
    validate_config(deep_merge(both, yaml.safe_load((ROOT / "config" / "imagenet100_ssl.yaml").read_text())))


@pytest.mark.parametrize("name", SHIPPED_CONFIGS)
def test_every_shipped_config_resolves_as_the_snakefile_resolves_it(default_config, name):
    """Each config/*.yaml over config/config.yaml (as `snakemake --configfile config/<name>` merges
    it), through the Snakefile's own `resolve_config` (schema, cross references, smoke counts, sweep,
    grid and U2-Net expansion, labels after expansion). Catches a bad or misspelt key, or a value the
    schema rejects, in any shipped config (config/park_real_data.yaml included), and a merge that
    silently drops the file's datasets, experiments or grids."""
    own = yaml.safe_load((ROOT / "config" / name).read_text()) or {}
    resolved = resolve_config(deep_merge(default_config, own))
    for section in ("datasets", "experiments", "grids"):
        assert set(own.get(section) or {}) <= set(resolved[section]), section
    for experiment, spec in (own.get("experiments") or {}).items():
        if spec.get("method"):
            assert resolved["experiments"][experiment]["method"] == spec["method"], experiment
    for grid in own.get("grids") or {}:  # every grid cell became an experiment of its own
        assert any(spec.get("grid") == grid for spec in resolved["experiments"].values()), grid


def test_the_paper_configs_resolve_together_in_smoke_mode(default_config):
    """The paper configs on one command line (as `conftest.paper_smoke` gives them) with
    `smoke: true`: they resolve without clashing labels or keys."""
    config = default_config
    for path in PAPER_CONFIGS:
        config = deep_merge(config, yaml.safe_load((ROOT / path).read_text()))
    resolved = resolve_config(deep_merge(config, {"smoke": True}))
    assert resolved["smoke"] is True
    labels = [spec["label"] for spec in resolved["experiments"].values() if "grid" not in spec]  # grid runs share theirs
    assert len(labels) == len(set(labels))
    for path in PAPER_CONFIGS:  # nothing of any file is lost in the merge
        assert set(yaml.safe_load((ROOT / path).read_text()).get("experiments") or {}) <= set(resolved["experiments"])


@pytest.mark.parametrize("path, value, key", [
    (("training", "epochs"), 0, "training.epochs"),
    (("datasets", "in9", "segmentation", "method"), "watershed", "datasets.in9.segmentation.method"),
    (("datasets", "in9", "variants"), ["original", "mixed_weird"], "datasets.in9.variants.1"),
    (("datasets", "in9", "source", "kind"), "flickr", "datasets.in9.source.kind"),
    (("training", "optimizer", "lr"), -1, "training.optimizer.lr"),
    (("seeds",), [], "seeds"),
])
def test_bad_values_name_their_key(default_config, path, value, key):
    cfg = copy.deepcopy(default_config)
    node = cfg
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        validate_config(cfg)


def test_unknown_keys_and_cross_references(default_config):
    cfg = copy.deepcopy(default_config)
    cfg["training"]["epoch"] = 3  # a typo must not be silently ignored
    with pytest.raises(ConfigError, match="epoch"):
        validate_config(cfg)
    cfg = copy.deepcopy(default_config)
    cfg["experiments"]["base_in9"]["method"] = "magic"
    with pytest.raises(ConfigError, match="experiments.base_in9.method"):
        validate_config(cfg)


def test_snakemake_stops_at_start_on_a_bad_value(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--config", "seed=-3"],
                          cwd=workdir(), capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert "seed" in proc.stdout + proc.stderr and "minimum" in proc.stdout + proc.stderr


def test_sweeps_become_experiments_and_reuse_the_base_run(default_config):
    from debias_workbench.workflow.config import expand_sweeps, runs

    default_config["sweeps"] = yaml.safe_load((ROOT / "config" / "imagenet9.yaml").read_text())["sweeps"]
    cfg = expand_sweeps(default_config)
    points = cfg["sweep_points"]["lambda"]["points"]
    assert [v for v, _ in points] == [0.25, 1.0, 4.0] and points[1][1] == "clad"  # lambda 1 is CLAD itself
    exp = cfg["experiments"][points[0][1]]
    assert exp["method"] == "clad" and exp["method_args"] == {"lambda": 0.25} and exp["seeds"] == [0]
    assert (points[0][1], 0) in runs(cfg) and (points[0][1], 1) not in runs(cfg)
    assert [s for e, s in runs(cfg) if e == "clad"] == default_config["seeds"]
    bad = copy.deepcopy(default_config)
    bad["sweeps"]["lambda"]["arg"] = "lamda"
    with pytest.raises(ConfigError, match="sweeps.lambda.arg"):
        validate_config(bad)


def test_u2net_comparison_adds_a_dataset_and_clad_runs(default_config):
    from debias_workbench.papers.clad.workflow import expand_segmentation_comparison

    assert expand_segmentation_comparison(default_config) == default_config  # not configured: nothing added
    cfg = copy.deepcopy(default_config)
    cfg["analyses"]["u2net_model"] = "/models/u2netp.onnx"
    out = expand_segmentation_comparison(cfg)
    assert out["datasets"]["in9_u2net"]["segmentation"]["method"] == "u2net"
    assert out["datasets"]["in9_u2net"]["segmentation"]["u2net_model"] == "/models/u2netp.onnx"
    assert {e for e in out["experiments"] if e.endswith("_u2net")} == {"clad_u2net", "clad_plus_u2net"}
    assert out["experiments"]["clad_u2net"]["label"] == "CLAD (U2-Net)"
    validate_config(out)


def test_methods_args_and_needed_variants_are_checked(default_config):
    cfg = copy.deepcopy(default_config)
    cfg["experiments"]["clad"]["method_args"] = {"temperature": 0.1}
    with pytest.raises(ConfigError, match="experiments.clad.method_args"):
        validate_config(cfg)
    cfg = copy.deepcopy(default_config)
    cfg["datasets"]["in9"]["variants"].remove("only_bg_t")
    with pytest.raises(ConfigError, match="only_bg_t"):
        validate_config(cfg)


@pytest.mark.parametrize("edit, message", [
    (lambda c: c["grids"]["rebias_mnist"].update(train_variants=["rho_0.55"]), "grids.rebias_mnist.train_variants"),
    (lambda c: c["grids"]["rebias_mnist"]["curves"].update(methods=["vanilla", "magic"]),
     "grids.rebias_mnist.curves.methods"),
    (lambda c: c["grids"]["rebias_mnist"].update(figure_variant="unbiased"), "grids.rebias_mnist.figure_variant"),
    (lambda c: c["grids"]["rebias_mnist"]["methods"]["rebias"].update(method_args={"sigma": 1}),
     "grids.rebias_mnist.methods.rebias"),
    (lambda c: c["analyses"]["texture"].update(experiments=["nope"]), "analyses.texture.experiments"),
    (lambda c: c["datasets"]["biased_mnist"]["source"].update(kind="idx"), "train_images"),
])
def test_grid_and_rebias_errors_name_their_key(default_config, edit, message):
    cfg = copy.deepcopy(default_config)
    edit(cfg)
    with pytest.raises(ConfigError, match=message):
        validate_config(cfg)


def test_a_switch_outside_its_run_stops_naming_its_key(default_config):
    """Park et al.'s T2 at or past the run's end (the guidance would never switch on) stops the
    config: in a run counted in iterations (config/park_real_data.yaml's 50K) and in one counted in
    epochs (the demo's Colored MNIST grid); the shipped values pass."""
    real = deep_merge(default_config, yaml.safe_load((ROOT / "config" / "park_real_data.yaml").read_text()))
    resolve_config(real)
    bad = copy.deepcopy(real)
    bad["grids"]["park_waterbirds"]["methods"]["ours"]["method_args"]["t2"] = 50_000
    with pytest.raises(ConfigError, match=r"grids\.park_waterbirds\.methods\.ours\.method_args\.t2: t2 = 50000 is not "
                                          r"inside the run's 50,000 iterations"):
        resolve_config(bad)
    demo = copy.deepcopy(default_config)
    demo["grids"]["park_cmnist"]["methods"]["ours"]["method_args"]["t2"] = 100_000
    with pytest.raises(ConfigError, match=r"grids\.park_cmnist\.methods\.ours\.method_args\.t2: .* epochs of about"):
        resolve_config(demo)


def test_a_grid_methods_own_seeds_split_its_packs(default_config):
    """rebias_mnist: the baselines take the grid's one seed, Vanilla and ReBias three; the seed-0
    job trains all six methods, the seed-1 and seed-2 jobs those two. The runs declared on their
    own are packs of one; `pack` splits a grid's jobs further."""
    from debias_workbench.workflow.config import expand_grids, packs, runs

    config = expand_grids(validate_config(copy.deepcopy(default_config)))
    by_name = {p.name: p for p in packs(config)}
    first, second = by_name["_rebias_mnist"], by_name["_rebias_mnist_2"]
    assert first.constraints["seed"] == ["0"] and second.constraints["seed"] == ["1", "2"]
    assert second.experiments({"variant": "rho_0.5"}) == ["rebias_mnist_vanilla_rho_0.5", "rebias_mnist_rebias_rho_0.5"]
    assert len(first.members) == 6
    assert by_name["_park_cmnist"].constraints["seed"] == ["0", "1", "2"] and "_park_cmnist_2" not in by_name
    alone = by_name[""].constraints["experiment"]
    assert "base_in9" in alone and not any(e.startswith("rebias_mnist_") for e in alone)
    assert config["experiments"]["rebias_mnist_hex_rho_0.5"]["seeds"] == [0]
    assert config["experiments"]["rebias_mnist_rebias_rho_0.5"]["seeds"] == [0, 1, 2]
    packed = [(e, int(s)) for p in packs(config)[1:] for m in p.members for v in p.constraints["variant"]
              for s in p.constraints["seed"] for e in [m.format(variant=v)]]
    packed += [(e, s) for e, s in runs(config) if e in alone]
    assert sorted(packed) == sorted(runs(config))  # each (experiment, seed) in exactly one pack
    config["grids"]["park_cmnist"]["pack"] = 2
    sizes = [len(p.members) for p in packs(config) if p.name.startswith("_park_cmnist")]
    assert sizes == [2, 2, 1]  # five methods, every seed, in packs of two

def test_every_run_is_scored_by_exactly_one_scoring_pack_with_its_siblings(default_config):
    """A scoring job scores every seed of one experiment trained alone (one rule per distinct seed list:
    Base (SIN9)'s five seeds apart from the three of the others), or every seed of a grid pack on one
    train variant; the Background Challenge runs also score the official images when that dataset is set."""
    from debias_workbench.workflow.config import background_challenge_runs, expand_grids, runs, scoring_packs

    config = expand_grids(validate_config(copy.deepcopy(default_config)))
    scored = [(m.format(**{w: v}), s) for p in scoring_packs(config) for w, values in p.constraints.items()
              for v in values for m in p.members for s in p.seeds]
    assert sorted(scored) == sorted(runs(config))  # each (experiment, seed) in exactly one scoring job
    alone = [p for p in scoring_packs(config) if "experiment" in p.constraints]
    assert [p.name for p in alone] == ["", "_2"] and not any(p.official for p in scoring_packs(config))
    assert {len(p.seeds) for p in alone} == {3, 5} and "base_sin9" in next(p for p in alone if len(p.seeds) == 5
                                                                            ).constraints["experiment"]
    assert next(p for p in scoring_packs(config) if p.name == "_rebias_mnist_2").seeds == (1, 2)
    config["evaluation"]["official_dataset"] = "in9"  # any dataset name: only the flag is read here
    flagged = {e for p in scoring_packs(config) if p.official for e in p.constraints.get("experiment", [])}
    assert flagged == set(background_challenge_runs(config)) and "base_in9" in flagged


def test_a_grid_of_a_park_report_needs_its_test_sets_and_model_selection(default_config):
    """The park paper's check (papers/park/workflow.py) names the grid's report key; the schema takes the
    grid report kinds the papers declare."""
    from debias_workbench.workflow.schema import load_schema

    kinds = load_schema()["properties"]["grids"]["additionalProperties"]["properties"]["report"]["enum"]
    assert sorted(kinds) == ["matrix", "park", "park_ablation", "rebias"]
    cfg = copy.deepcopy(default_config)
    cfg["grids"]["rebias_mnist"]["report"] = "park"
    with pytest.raises(ConfigError, match=r"grids.rebias_mnist.report: park needs a dataset with `valid`"):
        validate_config(cfg)
    cfg["grids"]["rebias_mnist"]["report"] = "parks"
    with pytest.raises(ConfigError, match=r"grids.rebias_mnist.report: 'parks' is not one of"):
        validate_config(cfg)
