"""`workbench plan`'s figures are what the jobs will spend: GPU-hours are GPUs x hours, a table is the sum of
its rows, every job lists its CPUs and memory, the runs-at-once speedup is counted only where the job's request
gives what it was measured with, and the docs' cost figures are the plan's."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from debias_workbench.cli import main as workbench
from debias_workbench.workflow import resources
from debias_workbench.workflow.config import resolve_config
from debias_workbench.workflow.plan import load_config, plan
from debias_workbench.workflow.plan_text import summary
from debias_workbench.workflow.slices import run_config

ROOT = Path(__file__).resolve().parents[1]
#: the real-scale paper configs and the matrix at paper scale
PAPER_CONFIGS = ["imagenet9.yaml", "imagenet100_ssl.yaml", "park_real_data.yaml", "biased_mnist_paper.yaml",
                 "matrix_paper.yaml"]


def _summary(*files: Path) -> dict:
    return summary(plan(list(files)))


def test_gpu_hours_do_not_fall_when_a_run_takes_two_gpus(tmp_path):
    """A run on two GPUs ends sooner but holds both: its GPU-hours are 2 x its hours (at 80 % of a linear
    speed-up, 1.25x one GPU's), so the plan's GPU-hours rise, never fall, when training.gpus goes 1 -> 2."""
    config = ROOT / "config" / "imagenet9.yaml"
    two = tmp_path / "two_gpus.yaml"
    two.write_text("training: {gpus: 2}\n")
    one_gpu, two_gpus = plan([config]), plan([config, two])
    assert summary(two_gpus)["gpu_hours"] > summary(one_gpu)["gpu_hours"]  # the old plan: 30.2 -> 21.7
    assert {j.gpus for j in two_gpus.jobs if j.runs} == {2}
    assert all("2 GPUs at 80% of a linear speed-up (not measured)" == j.note for j in two_gpus.jobs if j.runs)
    train = [sum(j.gpu_hours for j in p.jobs if j.runs) for p in (one_gpu, two_gpus)]
    assert train[1] == pytest.approx(train[0] / 0.8, rel=1e-6)  # MULTI_GPU_EFFICIENCY: 2 x (1 / (2 x 0.8))
    # and each job ends sooner: its wall time (and request) falls
    assert max(j.estimate_minutes for j in two_gpus.jobs if j.runs) < max(j.estimate_minutes for j in one_gpu.jobs
                                                                          if j.runs)


@pytest.mark.parametrize("name", ["park_real_data.yaml", "matrix_paper.yaml"])
def test_each_table_is_the_sum_of_its_rows(name):
    """A table's GPU- and CPU-hours are its jobs' and its training jobs' GPU-hours are its runs' (each run its
    share of its job's, the runs-at-once speedup counted as the job's): the header and the rows agree."""
    out = _summary(ROOT / "config" / name)
    for table, figures in out["tables"].items():
        jobs = [j for j in out["jobs"] if j["table"] == table]
        runs = [r for r in out["runs"] if r["table"] == table]
        near = 1e-3 + 5e-5 * (len(jobs) + len(runs))  # the JSON's rounding: 3 decimals a table, 4 a row
        assert figures["gpu_hours"] == pytest.approx(sum(j["gpu_hours"] for j in jobs), abs=near), table
        assert figures["cpu_hours"] == pytest.approx(sum(j["cpu_hours"] for j in jobs), abs=near), table
        training = sum(j["gpu_hours"] for j in jobs if j["runs"])
        assert sum(r["gpu_hours"] for r in runs) == pytest.approx(training, abs=near), table
        assert figures["run_gpu_hours"] == pytest.approx(training, abs=near), table
    assert out["gpu_hours"] == pytest.approx(sum(f["gpu_hours"] for f in out["tables"].values()), abs=0.01)
    # where three runs share a GPU with the speedup counted, a run's share is under its GPU-hours alone
    assert any(r["gpu_hours"] < r["gpu_hours_alone"] for r in out["runs"])


@pytest.mark.parametrize("name", PAPER_CONFIGS)
def test_every_job_lists_its_cpus_and_the_speedup_is_counted_only_where_its_request_gives_it(name):
    """Every job of `--json` lists its CPUs (its rule's threads) and memory; a training job of several runs
    at once counts the measured speedup only where it asks a CPU for each busy thread of its runs and they
    hold their split in memory; the paper configs' three-runs-per-GPU jobs ask for that."""
    out = _summary(ROOT / "config" / name)
    cfg = resolve_config(load_config([ROOT / "config" / name]))
    for job in out["jobs"]:
        assert job["cpus"] >= 1 and job["mem_mb"] > 0, job
        if job["runs"] > 1 and job["gpus"] == 1 and cfg["training"]["runs_per_gpu"] > 1:
            assert job["note"], job
            seed = int(job["target"].rsplit(" seed ", 1)[1])
            runs = [run_config(cfg, e, seed) for e in job["target"].rsplit(" seed ", 1)[0].split("+")]
            shared = resources.runs_at_once(runs, cfg["training"]["runs_per_gpu"], job["cpus"])
            counted = shared.credited > 1
            assert counted == ("counted (" in job["note"]), job
            busy = shared.at_once * max(resources.busy_threads(r) for r in runs)
            assert counted == (job["cpus"] >= busy and not any(resources.streams(r) for r in runs)), job
            if name in ("park_real_data.yaml", "biased_mnist_paper.yaml"):  # their grids hold their splits
                assert counted and job["cpus"] >= 3, job


def test_plan_text_says_how_runs_share_a_gpu(capsys, tmp_path):
    """With the demo's 1 CPU a job, three runs at once are costed one after the other, and the plan says why."""
    one_cpu = tmp_path / "one_cpu.yaml"
    one_cpu.write_text("training: {threads: 1}\n")
    assert workbench(["plan", "--configfile", str(ROOT / "config" / "park_real_data.yaml"), str(one_cpu)]) == 0
    text = capsys.readouterr().out
    assert "3 runs at once, speedup not counted: the job asks 1 CPU(s) (training.threads)" in text
    assert workbench(["plan", "--configfile", str(ROOT / "config" / "park_real_data.yaml"), "--json"]) == 0
    jobs = json.loads(capsys.readouterr().out)["jobs"]
    assert all("cpus" in j and "note" in j for j in jobs)


def test_the_step_rows_spread_between_device_check_runs_is_shown_or_one_run_said(monkeypatch, capsys):
    """step_times.yaml keeps the rows of the check's other runs on its card: each run row of the plan shows
    its measured row's lowest-highest step ms over them; with no other run, "one run" stands beside it."""
    import dataclasses

    from debias_workbench.workflow import cost

    times = cost.cost_model().step_times
    assert times.other_runs and times.spread("erm")[2] == 1 + len(times.other_runs)
    out = _summary(ROOT / "config" / "imagenet9.yaml")
    erm = next(r for r in out["runs"] if r["row"] == "erm")
    low, high = min(times.rows["erm"].step_ms, *(o.step_ms["erm"] for o in times.other_runs)), max(
        times.rows["erm"].step_ms, *(o.step_ms["erm"] for o in times.other_runs))
    assert erm["row_step_ms"] == {"low_ms": low, "high_ms": high, "runs": 1 + len(times.other_runs)} and low < high
    assert [o["commit"] for o in out["step_times"]["other_runs"]] == [o.commit for o in times.other_runs]
    assert workbench(["plan", "--configfile", str(ROOT / "config" / "imagenet9.yaml")]) == 0
    assert f"{low:g}-{high:g} ({1 + len(times.other_runs)})" in capsys.readouterr().out
    alone = dataclasses.replace(cost.cost_model(), step_times=dataclasses.replace(times, other_runs=()))
    monkeypatch.setattr(cost, "cost_model", lambda: alone)
    assert workbench(["plan", "--configfile", str(ROOT / "config" / "imagenet9.yaml")]) == 0
    text = capsys.readouterr().out
    assert "step rows: one run of the device check" in text
    assert f"{times.rows['erm'].step_ms:g} one run" in text


def test_the_device_check_keeps_the_rows_it_replaces_as_another_run(tmp_path):
    """A rewrite of the step-time file on the same card moves the rows it replaces to `other_runs` (the
    newest first, at most KEPT_RUNS), which the cost model reads back; another card's rows are not kept."""
    from benchmarks.device_check import KEPT_RUNS, write_step_times

    from debias_workbench.workflow.cost import read_step_times

    path = tmp_path / "step_times.yaml"

    def check(ms: float, commit: str, card: str = "card A") -> None:
        throughput = {"size": 224, "networks": {"erm": "resnet50"}, "results": {"erm": {"batch": 64, "step_ms": ms}}}
        write_step_times(path, throughput, card, commit, "python -m benchmarks.device_check")

    check(25.0, "c1")
    assert read_step_times(path).other_runs == ()
    check(33.0, "c2")
    times = read_step_times(path)
    assert times.rows["erm"].step_ms == 33.0 and times.spread("erm") == (25.0, 33.0, 2)
    for k in range(KEPT_RUNS + 2):
        check(30.0 + k, f"c{3 + k}")
    assert len(read_step_times(path).other_runs) == KEPT_RUNS
    check(40.0, "c9", card="card B")
    assert read_step_times(path).other_runs == () and read_step_times(path).spread("erm") == (40.0, 40.0, 1)


#: the paper configs whose sum docs/cluster.md and the README give (the matrix is counted apart)
SUMMED = ["imagenet9.yaml", "imagenet100_ssl.yaml", "park_real_data.yaml", "park_ablation.yaml",
          "biased_mnist_paper.yaml"]


def _number(cell: str) -> float:
    return float(re.match(r"[\d,.]+", cell.strip()).group().replace(",", ""))


def test_the_docs_cost_figures_are_the_plans():
    """docs/cluster.md's table between its `plan totals` markers, its sum of the five paper configs, the
    README's, and docs/matrix.md's cost of the matrix at paper scale are `workbench plan`'s figures."""
    cluster = (ROOT / "docs" / "cluster.md").read_text()
    block = cluster.split("<!-- plan totals: begin -->")[1].split("<!-- plan totals: end -->")[0]
    rows = [line.split("|")[1:-1] for line in block.strip().splitlines()[2:]]
    plans = {}
    for cells in rows:
        name = re.search(r"`config/([\w.]+)`", cells[0]).group(1)
        out = plans[name] = _summary(*([] if name == "config.yaml" else [ROOT / "config" / name]))
        assert [_number(c) for c in cells[1:6]] == [round(out["gpu_hours"], 1), round(out["cpu_hours"], 1),
                                                    len(out["runs"]), out["scheduler_jobs"],
                                                    round(out["largest_request"]["runtime_hours"], 1)], name
    assert {*SUMMED, "config.yaml", "matrix_paper.yaml"} <= set(plans)
    total = sum(plans[name]["gpu_hours"] for name in SUMMED)
    said = re.search(r"five paper configs add up to \*\*([\d.]+) GPU-h on one H200 \((\d+) h on an 8-GPU node", cluster)
    assert (float(said.group(1)), int(said.group(2))) == (round(total, 1), round(total / 8)), said.group(0)
    readme = re.search(r"the five paper configs: ([\d.]+) GPU-h", (ROOT / "README.md").read_text())
    assert float(readme.group(1)) == round(total, 1)
    matrix, text = plans["matrix_paper.yaml"], " ".join((ROOT / "docs" / "matrix.md").read_text().split())
    said = re.search(r"\): (\d+) runs \(.*?\), ([\d,]+) scheduler jobs, \*\*([\d.]+) GPU-h\*\* and ([\d.]+) CPU-h, "
                     r"the largest request ([\d.]+) h", text)
    assert [_number(g) for g in said.groups()] == [len(matrix["runs"]), matrix["scheduler_jobs"],
                                                   round(matrix["gpu_hours"], 1), round(matrix["cpu_hours"], 1),
                                                   round(matrix["largest_request"]["runtime_hours"], 1)]
    assert f"about {round(matrix['gpu_hours'])} GPU-hours" in text
