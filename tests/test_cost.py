"""The cost model (workflow/cost.py) and `workbench plan`: every registered method costed by a measured
row or a declared stand-in, requests within their bounds for every job of every shipped config, and the
plan of each config before any of its data exists."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest

from debias_workbench.cli import main as workbench
from debias_workbench.training.methods import REGISTRY
from debias_workbench.training.methods import spec as method_spec
from debias_workbench.workflow import cost, resources
from debias_workbench.workflow.config import resolve_config
from debias_workbench.workflow.plan import load_config, plan
from debias_workbench.workflow.slices import run_config

ROOT = Path(__file__).resolve().parents[1]
#: every shipped config the plan must cost ([] is the embedded default alone)
CONFIGS = [[], ["imagenet9.yaml"], ["imagenet100_ssl.yaml"], ["park_real_data.yaml"], ["park_ablation.yaml"],
           ["biased_mnist_paper.yaml"], ["matrix_paper.yaml"]]
#: the device check's rows not named after the method they measure (benchmarks/gpu_throughput.py, CASES)
MEASURED = {"park": "intrinsic_feature_enhancement", "moco_v2_patch": "moco_v2"}


def test_every_registered_method_is_costed_by_a_measured_row():
    """Each method's spec declares its cost (training/methods/<module>.yaml: a class without one is refused
    at load, spec.py); the reference row is measured."""
    model = cost.cost_model()
    assert model.reference_row in model.step_times.rows
    for method in REGISTRY:
        entry = method_spec(method).cost
        for each in [entry, *(e for values in entry.get("when", {}).values() for e in values.values())]:
            assert each["row"] in model.step_times.rows, method
            # an entry without a reason is costed by the row that measured that very method
            assert each.get("reason") or MEASURED.get(each["row"], each["row"]) == method, (method, each)


def test_a_run_at_the_measured_shape_is_the_measurement_and_others_scale(default_config):
    cfg = resolve_config(load_config([ROOT / "config" / "imagenet9.yaml"]))
    run = run_config(cfg, "base_in9", 0)  # ResNet-50, batch 64, 224 px: the erm row itself
    measured = cost.run_estimate(run)
    assert (measured.row, measured.step_ms, measured.estimate) == ("erm", 25.0, False)
    half = copy.deepcopy(run)
    half["dataset_config"]["image_size"], half["training"]["batch_size"] = 112, 128  # 1/4 the pixels, 2x the batch
    scaled = cost.run_estimate(half)
    assert scaled.step_ms == pytest.approx(25.0 / 4 * 2) and scaled.estimate
    r18 = copy.deepcopy(run)
    r18["training"]["arch"] = "resnet18"
    assert cost.run_estimate(r18).step_ms == pytest.approx(25.0 * 3.63 / 8.17)
    tiny = copy.deepcopy(run)
    tiny["dataset_config"]["image_size"] = 28
    assert cost.run_estimate(tiny).step_ms == cost.cost_model().min_step_ms  # launch-bound floor
    assert measured.gpu_seconds == pytest.approx(measured.steps * 0.025)


def test_learned_mixins_estimate_counts_g_pretraining_besides_fs_epochs():
    """ReBias's LearnedMixin+H on IN-9: F's 120 epochs at the ReBias row, and G's 30 epochs of
    pre-training before them as ERM steps of BagNet-18."""
    cfg = resolve_config(load_config([ROOT / "config" / "imagenet9.yaml"]))
    run = run_config(cfg, "r18_learned_mixin", 0)
    without = copy.deepcopy(run)
    without["method_args"]["g_pretrain_epochs"] = 0
    estimate, plain = cost.run_estimate(run), cost.run_estimate(without)
    per_epoch = math.ceil(cost.dataset_images(run["dataset_config"]) / run["training"]["batch_size"])
    assert estimate.steps == plain.steps == 120 * per_epoch
    g_ms, _ = cost.scaled_step_ms("erm", ["bagnet18"], 224, 128)
    assert estimate.gpu_seconds - plain.gpu_seconds == pytest.approx(30 * per_epoch * g_ms / 1000)


def test_method_arguments_pick_their_row():
    assert cost.method_cost("moco_v2", {"negative": "patch"}).row == "moco_v2_patch"
    assert cost.method_cost("moco_v2", {"negative": "none"}).row == "moco_v2"
    assert cost.method_cost("byol", {"negative": "patch"}).reason  # BYOL + patch: a declared stand-in
    assert cost.method_cost("biased", {}).trains == ("biased_arch",)
    assert cost.method_cost("rebias", {}).trains == ("arch", "biased_arch")
    assert cost.method_cost("erm", {}).trains == ("arch",) and cost.method_cost("erm", {}).reason is None
    assert cost.method_cost("vanilla", {}).reason  # the ERM class registered as ReBias's Vanilla: its own entry


def test_the_work_beside_a_methods_steps_is_declared_with_its_arguments():
    """A linear probe is costed where the method's cost names the arguments counting it: each method with
    such arguments names them, and only arguments it takes."""
    for method in REGISTRY:
        declared = method_spec(method)
        assert set(declared.cost.get("probe", {}).values()) <= set(declared.args), method
        assert ("probe" in declared.cost) == ("probe_epochs" in declared.args), method


def test_a_committee_is_costed_once_by_its_own_job_not_by_the_runs_that_read_it():
    """The plan has one prerequisite job per BiasEnsemble committee the runs read (LfF+BE and Park et al. on
    one train variant and seed share one), asking for its members' steps, a job of its own or a member of a job
    group (`workflow.job_groups`: park_real_data's committees are minutes each); the runs' own estimates leave it
    out (they read its file), so no committee is counted twice."""
    from debias_workbench.training.prerequisites import run_jobs

    config = load_config([ROOT / "config" / "park_real_data.yaml"])
    cfg = resolve_config(config)
    p = plan([ROOT / "config" / "park_real_data.yaml"])
    readers = [r for r in (run_config(cfg, line.experiment, line.seed) for line in p.runs) if run_jobs(r)]
    needed = {job.digest: job for r in readers for job in run_jobs(r)}
    planned = [m for j in p.jobs for m in (j.members or (j,)) if m.rule == "prerequisite"]
    assert all(j.members for j in p.jobs if j.rule.startswith("prerequisites_"))
    assert not any(j.rule == "prerequisite" for j in p.jobs)  # all of them in groups
    assert {job.kind.name for job in needed.values()} == {"committee"}
    assert len(readers) > len(needed) == len(planned) > 0
    for job in planned:
        (digest,) = [d for d in needed if d in job.target]
        assert job.estimate_minutes == pytest.approx(resources.prerequisite(needed[digest].kind, needed[digest].config)[0])
    run = readers[0]
    longer = copy.deepcopy(run)
    longer["method_args"]["committee_steps"] *= 10
    assert cost.run_estimate(longer).gpu_seconds == cost.run_estimate(run).gpu_seconds
    (short,), (long_,) = run_jobs(run), run_jobs(longer)
    assert resources.prerequisite(long_.kind, long_.config)[0] == pytest.approx(
        10 * resources.prerequisite(short.kind, short.config)[0])


def test_a_method_class_without_a_declared_cost_is_refused(tmp_path, monkeypatch):
    import importlib

    spec = importlib.import_module("debias_workbench.training.methods.spec")  # the module, not `methods.spec()`
    (tmp_path / "uncosted_method.py").write_text("")
    (tmp_path / "uncosted_method.yaml").write_text("New: {args: {}}\n")
    monkeypatch.syspath_prepend(tmp_path)
    with pytest.raises(ValueError, match=r"declares no cost for \['New'\]"):
        spec.module_specs("uncosted_method")


@pytest.mark.parametrize("files", CONFIGS, ids=lambda f: f[0] if f else "config.yaml")
def test_every_request_is_within_its_bounds(files):
    """Request <= 2 x estimate + the minimum and <= cluster.max_job_hours, for every job, retries included;
    >= the estimate where one job can hold it, else the plan counts the jobs it needs."""
    p = plan([ROOT / "config" / f for f in files])
    cap = p.max_job_hours * 60
    assert p.jobs and p.runs
    for job in p.jobs:
        ceiling = 2 * job.estimate_minutes + cost.MINIMUM_MINUTES
        for attempt in (1, 2, 3):
            request = cost.request_minutes(job.estimate_minutes, p.max_job_hours, attempt)
            assert request <= math.ceil(ceiling) and request <= cap, job
        if job.jobs_needed == 1:
            assert job.request_minutes >= job.estimate_minutes, job
        else:
            assert job.jobs_needed * cost.job_budget_minutes(p.max_job_hours) >= job.estimate_minutes, job


def test_a_run_over_the_cap_asks_for_the_cap_and_counts_its_jobs():
    config = load_config([ROOT / "config" / "imagenet100_ssl.yaml"])
    config["cluster"]["max_job_hours"] = 2
    cfg = resolve_config(config)
    run = run_config(cfg, "in100_moco", 0)  # about 10 h on the H200
    minutes = resources.training([run])[0]
    assert minutes > 8 * 60
    rule = resources.rule_resources(cfg, True, lambda wc: resources.training([run]))
    assert rule["runtime"](None, 1) == rule["runtime"](None, 2) == 120
    assert cost.jobs_needed(minutes, 2) == math.ceil(minutes / ((120 - cost.MINIMUM_MINUTES) / cost.REQUEST_MARGIN))
    # on a cluster its rule retries once per further job, besides the kill's retry; no attempt asks for more than the cap
    retries = resources.continuation_retries(1, [minutes, 30.0], 2)
    assert retries == cost.jobs_needed(minutes, 2) > 1
    assert all(rule["runtime"](None, attempt) == 120 for attempt in range(1, retries + 2))
    assert resources.continuation_retries(1, [30.0], 2) == 1 and resources.continuation_retries(0, [], 2) == 0


def test_a_cluster_run_sets_each_training_rules_continuation_retries_at_its_start():
    """Snakemake chooses the executor after reading the Snakefile, where `workflow.local_exec` is always true, so
    the workflow sets the training rules' retries at its start (`onstart`): where it submits to a cluster, the
    given --retries plus the continuations of the rule's longest job; a local run and a submitted job's own
    Snakemake keep --retries as given."""
    from types import SimpleNamespace

    minutes = {"train": [30.0], "train_grid": [30.0, 300.0]}  # 300 min: several jobs of at most 2 h

    def rules_after(local_exec: bool, main: bool = True) -> dict[str, int]:
        rules = {name: SimpleNamespace(restart_times=1) for name in minutes}
        workflow = SimpleNamespace(is_main_process=main, local_exec=local_exec, get_rule=rules.__getitem__,
                                   execution_settings=SimpleNamespace(retries=1))
        resources.apply_continuation_retries(workflow, lambda: minutes, 2)
        return {name: rule.restart_times for name, rule in rules.items()}

    assert rules_after(local_exec=True) == rules_after(local_exec=False, main=False) == {"train": 1, "train_grid": 1}
    assert rules_after(local_exec=False) == {"train": 1, "train_grid": cost.jobs_needed(300.0, 2)}
    assert cost.jobs_needed(300.0, 2) > 1


@pytest.mark.parametrize("files", CONFIGS, ids=lambda f: f[0] if f else "config.yaml")
def test_workbench_plan_json_runs_before_any_data(files, tmp_path, monkeypatch, capsys):
    """From a directory holding nothing of the config's data (and no results): one JSON object."""
    monkeypatch.chdir(tmp_path)
    args = [str(ROOT / "config" / f) for f in files]
    assert workbench(["plan", *(["--configfile", *args] if args else []), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"gpu_hours", "cpu_hours", "runs", "jobs", "tables", "card", "largest_request"} <= set(out)
    assert out["card"] == cost.cost_model().step_times.card and out["gpu_hours"] > 0 and out["cpu_hours"] > 0
    assert sum(t["runs"] for t in out["tables"].values()) == len(out["runs"])
    assert out["largest_request"]["runtime_hours"] <= out["max_job_hours"]
    if files and files[0] != "park_ablation.yaml":  # the paper configs name data that is not here: listed, not fatal
        assert out["missing_paths"]


def test_plan_text_names_the_card_the_tables_and_the_totals(capsys):
    assert workbench(["plan", "--configfile", str(ROOT / "config" / "park_real_data.yaml")]) == 0
    text = capsys.readouterr().out
    assert "GPU figures for NVIDIA H200" in text and "paths still to fill" in text
    assert "== Park et al. (CVPR 2024) Table 1 on Waterbirds, BFFHQ and BAR: 250 runs" in text
    assert text.splitlines()[-1].startswith("total: ")
