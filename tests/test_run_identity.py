"""A job's identity is its own config slice: only what it depends on reruns it, checkpoints know
their run, and the config layer and the cluster profile decide from the config alone."""

import copy
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from debias_workbench.pipeline.datasets import FAMILIES
from debias_workbench.training.methods import METHODS, REGISTRY, spec
from debias_workbench.training.trainer import train
from debias_workbench.workflow.config import ConfigError, deep_merge, resolve_config
from debias_workbench.workflow.report_slice import report_config
from debias_workbench.workflow.schema import load_schema
from debias_workbench.workflow.slices import config_provenance, dataset_job_config, run_config

from .conftest import ROOT


def test_run_config_holds_what_the_run_depends_on_and_not_its_label(default_config):
    cfg = resolve_config(copy.deepcopy(default_config))
    run = run_config(cfg, "clad", 1)
    assert run["seed"] == 1 and run["method_args"] == spec("clad").defaults
    assert run["aligned_variants"] == {"backgrounds": "only_bg_t"} and "label" not in json.dumps(run)
    assert "threads" not in run["training"]  # speed only
    other = copy.deepcopy(cfg)
    other["experiments"]["clad"]["label"] = "renamed"
    other["report"]["grid_images"] = 3
    assert run_config(other, "clad", 1) == run
    source = config_provenance(cfg, ["config/config.yaml"], {})
    assert report_config(other, source) != report_config(cfg, source)
    other["experiments"]["base_in9"]["training"] = {"optimizer": {"name": "sgd", "lr": 0.5}}
    assert run_config(other, "clad", 1) == run and run_config(other, "base_in9", 0) != run_config(cfg, "base_in9", 0)


def test_a_fix_of_a_methods_or_a_familys_code_changes_the_identity_of_exactly_its_runs_and_stores(default_config,
                                                                                                  monkeypatch):
    """A method's or a family's `revision` (raised with a fix that moves results) enters the identity of
    its runs or stores only: a run of a revised method carries it, one of an unrevised method (and every
    other family's store) keeps the hash it had before revisions existed."""
    config = resolve_config(copy.deepcopy(default_config))
    for experiment, exp in config["experiments"].items():
        revision = spec(exp["method"]).revision
        assert run_config(config, experiment, 0).get("method_revision") == (revision or None), experiment
    assert spec("clad").revision >= 1 and spec("erm").revision == 0  # CLAD's two batch-norm passes (issue 51)
    assert dataset_job_config(config, "biased_mnist")["family_revision"] >= 1  # binarised digits, rho = 1 test split
    before = {d: dataset_job_config(config, d) for d in config["datasets"]}
    assert "family_revision" not in before["in9"]
    monkeypatch.setattr(FAMILIES["in9"], "revision", 7)
    after = {d: dataset_job_config(config, d) for d in config["datasets"]}
    assert after["in9"] == {**before["in9"], "family_revision": 7}
    assert {d: v for d, v in after.items() if d != "in9"} == {d: v for d, v in before.items() if d != "in9"}
    # a fix that moved only some configurations' bytes (jittered copies of the digits) moves only their stores
    for dataset in ("biased_mnist", "colored_mnist"):
        jittered = copy.deepcopy(config)
        jittered["datasets"][dataset]["source"]["copies"] = 3
        assert (dataset_job_config(jittered, dataset).get("family_revision", 0)
                == before[dataset].get("family_revision", 0) + 1), dataset


def test_checkpoint_of_another_config_is_not_resumed(tmp_path, tiny_store, default_config, capsys):
    cfg = copy.deepcopy(default_config)
    cfg["training"].update(epochs=2, batch_size=6)
    old = run_config(cfg, "base_in9", 0)
    train(old, tiny_store, tmp_path / "run", stop_after_epochs=1)  # killed after epoch 0
    new = copy.deepcopy(old)
    new["training"]["optimizer"] = {"name": "sgd", "lr": 0.5, "momentum": 0.9}
    resumed = torch.load(train(new, tiny_store, tmp_path / "run"))
    assert "starting over from epoch 0" in capsys.readouterr().out
    straight = torch.load(train(new, tiny_store, tmp_path / "straight"))
    assert all(torch.equal(straight["state_dict"][k], resumed["state_dict"][k]) for k in straight["state_dict"])
    assert json.loads((tmp_path / "run" / "config.json").read_text()) == new == resumed["run_config"]


@pytest.mark.parametrize("override, key", [
    ({"grids": {"rebias_mnist": {"training": {"epoch": 80}}}}, "grids.rebias_mnist.training"),
    ({"experiments": {"base_in9": {"training": {"optimizer": {"lr": "fast"}}}}},
     "experiments.base_in9.training.optimizer.lr"),
    ({"experiments": {"clad": {"method_args": {"queue_size": -5}}}}, "experiments.clad.method_args.queue_size"),
    ({"experiments": {"clad_plus": {"label": "CLAD"}}}, "experiments.clad_plus.label"),
    ({"experiments": {"clad": {"method_args": {"lamda": 2}}}}, "experiments.clad.method_args"),
])
def test_bad_overrides_name_their_dotted_key(default_config, override, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        resolve_config(deep_merge(default_config, override))


def test_every_method_declares_its_arguments_beside_its_class():
    for name in REGISTRY:
        assert METHODS[name].default_args == spec(name).defaults, name
        for arg, declared in spec(name).args.items():
            assert declared.get("description"), f"{name}.{arg} has no description"


#: which project packages each layer may import: each only those below it, but that the report reads
#: the papers' registry (`debias_workbench.papers` alone, whose entries import their papers lazily)
LAYERS = {"core": set(), "pipeline": {"core"}, "training": {"core", "pipeline"},
          "report": {"core", "pipeline", "training", "papers"}, "workflow": {"core", "pipeline", "training", "papers"},
          "papers": {"core", "pipeline", "training", "report"}}
PACKAGE = ROOT / "debias_workbench"


def imported_layers(path: Path) -> set[str]:
    """The layers a module imports: `debias_workbench.<layer>` and `from ..<layer>` (relative)."""
    text = path.read_text()
    named = re.findall(r"^\s*(?:from|import) debias_workbench\.(\w+)", text, re.M)
    depth = len(path.relative_to(PACKAGE).parts) - 1  # a relative import with this many dots leaves the layer
    relative = re.findall(r"^\s*from \.{%d}(\w+)" % (depth + 1), text, re.M) if depth else []
    return (set(named) | set(relative)) & set(LAYERS)


def test_each_layer_imports_only_the_layers_below_it_and_the_config_layer_no_torch():
    """A helper added to `pipeline/` and imported by `core/`, or a `training` module importing
    the workflow layer, would fail here (an import cycle in waiting)."""
    code = ("import sys; from debias_workbench.core import atomic, provenance, seeding, errors; "
            "assert not {'torch', 'zarr', 'debias_workbench.pipeline', 'debias_workbench.training'} & set(sys.modules), "
            "'core imports too much'; "
            "from debias_workbench.workflow import config, slices, resources; "
            "from debias_workbench.pipeline import datasets; from debias_workbench.report import build; "
            "from debias_workbench import cli; from debias_workbench.papers import PAPERS; [PAPERS[p] for p in PAPERS]; "
            "assert 'torch' not in sys.modules, 'torch imported by the config layer, the report or the command'; "
            "from debias_workbench.training import evaluation, trainer")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
    for layer, allowed in LAYERS.items():
        for path in (PACKAGE / layer).rglob("*.py"):
            imported = imported_layers(path)
            assert imported <= allowed | {layer}, f"{path} imports {sorted(imported - allowed - {layer})}"
    for path in [*(PACKAGE / "report").rglob("*.py"), *(PACKAGE / "workflow").rglob("*.py")]:  # the registry alone
        assert not re.search(r"^\s*(?:from|import) debias_workbench\.papers\.", path.read_text(), re.M), path
    for path in (PACKAGE / "papers").glob("*/workflow.py"):  # what the workflow imports of a paper: no report code
        assert imported_layers(path) <= {"core", "pipeline", "training"}, path
    subprocess.run([sys.executable, "-c", "import sys; from debias_workbench.workflow import paper_hooks; "
                    "assert paper_hooks.paper_workflow_modules(); assert 'debias_workbench.report' not in sys.modules"],
                   cwd=ROOT, check=True)
    assert "pipeline.config" not in (ROOT / "Snakefile").read_text()


def test_every_schema_key_has_a_description_and_a_default_and_the_configuration_reference_is_current():
    from debias_workbench.workflow.reference import REFERENCE_PAGE, reference_markdown, schema_keys, updated_page

    schema = load_schema()
    keys = list(schema_keys(schema))
    assert len(keys) > 120
    for key, sub, _required in keys:
        assert sub.get("description"), f"{key} has no description"
        if not re.fullmatch(r"datasets\.<\w+ dataset>", key):  # the dataset families' headings have none
            assert "default" in sub, f"{key} has no default"
    text = REFERENCE_PAGE.read_text()
    assert updated_page(text, reference_markdown()) == text, "docs/configuration.md: run workbench config-reference"


def test_schema_defaults_are_the_embedded_config(default_config):
    schema = load_schema()
    for key, value in default_config.items():
        assert schema["properties"][key]["default"] == value, key
    for name, value in default_config["training"].items():
        assert schema["$defs"]["training_fields"]["properties"][name]["default"] == value, name


def test_runtime_and_memory_follow_the_config(default_config):
    from debias_workbench.workflow import resources

    cfg = resolve_config(copy.deepcopy(default_config))
    run = run_config(cfg, "base_in9", 0)
    run["training"]["arch"] = "resnet50"  # over the cost model's launch-bound floor: every factor shows
    run["dataset_config"]["image_size"] = 112
    longer = copy.deepcopy(run)
    longer["training"]["epochs"] *= 10
    bigger = copy.deepcopy(run)
    bigger["dataset_config"]["image_size"] = 224
    assert resources.training([longer])[0] == pytest.approx(10 * resources.training([run])[0])
    assert resources.training([bigger])[0] == pytest.approx(4 * resources.training([run])[0])
    assert resources.training([bigger])[1] > resources.training([run])[1]
    by_steps = copy.deepcopy(run)  # a run counted in iterations: its steps, not its epochs, set the time
    by_steps["training"]["iterations"] = 100_000
    assert resources.training([by_steps])[0] > resources.training([longer])[0]
    streamed = copy.deepcopy(bigger)  # a split over the cache: two streamed windows, not the split
    streamed["training"]["loader"] = {"in_memory_max_gb": 0.0, "window_gb": 0.5}
    assert resources.training([streamed])[1] == pytest.approx(4000 + 2 * 512 * (1 + len(run["aligned_variants"])))
    rule = resources.rule_resources(cfg, True, lambda wc: resources.training([run]))
    assert rule["gpu"] == 1 and rule["slurm_partition"] == cfg["cluster"]["gpu_partition"]
    minutes = resources.training([run])[0]  # estimate x 1.5 + 10 min; a retry x 2 + 10 min
    assert rule["runtime"](None, 1) == math.ceil(1.5 * minutes + 10) and rule["runtime"](None, 2) == math.ceil(2 * minutes + 10)
    assert resources.rule_resources(cfg, False, lambda wc: (5, 100))["slurm_partition"] == "cpu"


def test_an_override_may_give_part_of_a_nested_section(default_config):
    """`optimizer: {lr: 0.01}` in an experiment overrides one key; the merged run keeps the rest,
    while the top-level section itself must stay complete."""
    cfg = resolve_config(deep_merge(default_config, {"experiments": {"base_in9": {"training": {"optimizer": {"lr": 0.01}}}}}))
    optimizer = run_config(cfg, "base_in9", 0)["training"]["optimizer"]
    assert optimizer == {**default_config["training"]["optimizer"], "lr": 0.01}
    incomplete = copy.deepcopy(default_config)
    del incomplete["training"]["optimizer"]["name"]
    with pytest.raises(ConfigError, match=r"training\.optimizer: 'name' is a required property"):
        resolve_config(incomplete)


#: the longest function and module the product package holds (issue "One package, one command")
MAX_FUNCTION_LINES, MAX_MODULE_LINES = 60, 400


def test_no_product_function_over_60_lines_and_no_module_over_400():
    """Small pieces a newcomer can read: every function of `debias_workbench` at most
    `MAX_FUNCTION_LINES` lines (docstring included), every module at most `MAX_MODULE_LINES`."""
    import ast

    long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        if len(text.splitlines()) > MAX_MODULE_LINES:
            long.append(f"{path.relative_to(ROOT)}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                    node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES:
                long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {node.end_lineno - node.lineno + 1} lines")
    assert not long, "split these:\n" + "\n".join(long)
