"""The benchmarks run: the GPU throughput benchmark every path at CPU small scale, judging its goals;
the demo's per-rule and per-phase accounting on a finished run's files."""

from __future__ import annotations

import json
import re

from benchmarks.gpu_throughput import busy_seconds, goal_lines


def test_the_device_check_runs_its_cpu_path_and_writes_the_measurements_block(tmp_path, capsys):
    """`python -m benchmarks.device_check --device cpu`: every stage at tiny shapes (the CUDA tests
    collected and skipped, the throughput rows in memory and streaming), one Markdown block."""
    from benchmarks.device_check import main as device_check

    assert device_check(["--device", "cpu", "--methods", "erm,clad,plain", "--out", str(tmp_path), "--commit", "abc1234",
                         "--write-step-times", str(tmp_path / "step_times.yaml")]) == 0
    text = (tmp_path / "device_check.md").read_text()
    assert text.startswith("### Device check, ") and ": CPU, commit abc1234" in text
    assert re.search(r"CUDA tests \(`pytest -m cuda`\): \d+ skipped", text), text
    in_memory = text.split("loader streaming")[0]
    rows = {line.split("|")[1].strip(): line for line in in_memory.splitlines() if line.startswith("| ")}
    assert {"erm", "clad", "plain"} <= set(rows) and "resnet50" in rows["erm"] and "in memory" in rows["erm"]
    assert "| erm | resnet50 |" in text.split("loader streaming")[1] and "| streaming |" in text
    for goal in ("our ERM / plain loop images/s:", "data wait share: max", "clad / erm step time:"):
        assert goal in text
    throughput = json.loads((tmp_path / "throughput.json").read_text())
    assert throughput["device"] == "CPU" and throughput["size"] == 32 and not throughput["failures"]
    assert "NOT GPU figures" in (tmp_path / "20-throughput.log").read_text()
    assert text in capsys.readouterr().out
    from debias_workbench.workflow.cost import read_step_times  # the cost model reads what the check wrote

    times = read_step_times(tmp_path / "step_times.yaml")
    assert (times.card, times.commit) == ("CPU", "abc1234") and set(times.rows) == {"erm", "clad"}  # no plain loop
    assert times.rows["erm"].networks == ("resnet50",) and times.rows["erm"].image_size == 32
    assert times.rows["erm"].step_ms == round(throughput["results"]["erm"]["step_ms"], 1)


def test_goal_verdicts():
    def row(images_per_s, wait, step_ms):
        return {"images_per_s": images_per_s, "wait_share": wait, "step_ms": step_ms}

    lines = goal_lines({"erm": row(130.0, 0.01, 500.0), "clad": row(60.0, 0.06, 1100.0), "plain": row(100.0, 0.3, 640),
                        "plain_amp": row(90.0, 0.2, 700), "moco_v2": row(200, 0.0, 640), "moco_v2_patch": row(190, 0.0, 700)})
    assert lines[0].startswith("our ERM / plain loop images/s: 1.30x against plain") and lines[0].endswith(": met")
    assert lines[1] == "data wait share: max 6.0 % (clad); goal <= 5 % for every method: NOT met (clad)"
    assert lines[2].startswith("cost relative to ERM (ERM's images/s / the method's): clad 2.17x")
    assert lines[3] == "clad / erm step time: 2.20x; goal <= 1.15x: NOT met, by 91 %"
    assert lines[4] == "moco_v2_patch / moco_v2 step time: 1.09x; goal <= 1.1x: met"
    busy = goal_lines({"erm": {**row(130.0, 0.0, 500.0), "gpu_busy": 0.9}, "clad": {**row(60.0, 0.0, 1100.0), "gpu_busy": 0.5}})
    assert "GPU-busy share of the step: erm 90 %, clad 50 %; goal >= 85 % for every method: NOT met (clad)" in busy


def test_gpu_busy_time_is_the_union_of_the_kernels_intervals():
    """Kernels on two streams overlap: the card is busy while any runs, gaps are idle."""
    assert busy_seconds([(5.0, 7.0), (0.0, 2.0), (1.0, 3.0), (2.5, 2.8), (10.0, 10.0)]) == 5.0
    assert busy_seconds([]) == 0.0


def test_batched_seeds_computes_the_same_losses_three_ways_and_prints_ratios(capsys):
    from benchmarks.batched_seeds import main as batched

    ratios = batched(["--models", "3", "--channels", "4,8", "--size", "8", "--batch", "4", "--steps", "1"])
    out = capsys.readouterr().out
    assert set(ratios) == {"sequential", "vmap", "grouped"} and ratios["sequential"] == 1.0
    assert "losses of two steps checked equal first" in out and "3 x SmallCNN [4, 8] at 8 px" in out


def _finished_job(results, rule: str, job: str, cpu: float, wall: float, log: str) -> None:
    """A job as Snakemake's benchmark file and the job's log leave it."""
    bench = results / "benchmarks" / rule / f"{job}.tsv"
    bench.parent.mkdir(parents=True, exist_ok=True)
    bench.write_text(f"s\th:m:s\tmax_rss\tcpu_time\n{wall}\t0:00:01\t1\t{cpu}\n")
    (results / "logs").mkdir(exist_ok=True)
    (results / "logs" / f"{job}.log").write_text(log)


def test_demo_rules_prints_rules_phases_and_epochs_before_and_after(tmp_path, capsys, monkeypatch):
    """Two runs of the same job: per rule with the same-name ratio, the phase table of the run whose
    jobs logged their phases (`core.phases`), and the wall seconds inside / outside the epochs."""
    import sys

    from benchmarks.demo_rules import main as demo_rules
    from debias_workbench.core.phases import phase, summary

    with phase("epochs"):
        with phase("saving"):
            pass
    line = summary(2.0)  # phases accumulate over the process: other tests' may be in it too
    recorded = json.loads(line.removeprefix("cpu seconds by phase: "))
    assert {"epochs", "saving", "imports", "other"} <= set(recorded) and recorded["imports"] >= 2.0
    before, after = tmp_path / "before", tmp_path / "after"
    _finished_job(before, "train", "train_clad_seed0", 20.0, 30.0, "clad seed 0 epoch 0: epoch_seconds=21.5\n")
    _finished_job(after, "train", "train_clad_seed0", 15.0, 24.0, "clad seed 0 epoch 0: epoch_seconds=21.5\n"
                  'cpu seconds by phase: {"imports": 2.5, "setup": 1.0, "epochs": 11.0, "other": 0.5}\n')
    monkeypatch.setattr(sys, "argv", ["demo_rules", str(after), str(before)])
    demo_rules()
    out = capsys.readouterr().out
    assert re.search(r"^train\s+1\s+20\s+30\s+1\s+15\s+24\s+0\.75\s+0\.80$", out, re.M), out
    assert "job wall-seconds after / before: 0.80" in out
    assert "before: training jobs' wall seconds inside their epochs 22, outside 8" in out
    assert "before: no job logged its CPU seconds by phase" in out
    assert re.search(r"^train\s+2\.5\s+0\.0\s+0\.0\s+1\.0\s+11\.0\s+0\.0\s+0\.0\s+0\.5$", out, re.M), out


def test_statistics_calibration_judges_the_reports_comparison(capsys, monkeypatch):
    """The calibration benchmark on 300 seeded repetitions per scenario and size: its last line, the
    worst case over the scenarios (models right on the same images or, with a method x image term,
    on partly different ones; wide or moderate per-image spread; 4,050 and 450 images), says "higher"
    or "lower" where nothing differs about as rarely as the 95 % level promises and detects Ge et
    al.'s effect; on the same draws the rule before (Welch-Satterthwaite) never says less, and its
    worst case says more."""
    import sys

    from benchmarks.statistics_calibration import SCENARIOS
    from benchmarks.statistics_calibration import main as calibration

    monkeypatch.setattr(sys, "argv", ["statistics_calibration", "--repetitions", "300"])
    calibration()
    out = capsys.readouterr().out
    fpr, power = map(float, re.fullmatch(r"fpr=([\d.]+) power=([\d.]+)", out.strip().splitlines()[-1]).groups())
    assert 1.0 <= fpr <= 8.0 and power >= 80.0, out
    rows = [tuple(map(float, r)) for r in re.findall(r"(\d+)%\s+([\d.]+) /\s+([\d.]+)\s+([\d.]+) /\s+([\d.]+)", out)]
    assert len(rows) == 2 * len(SCENARIOS), out
    assert all(today <= before and p_today <= p_before for _, today, before, p_today, p_before in rows), out
    assert max(r[2] for r in rows) > max(r[1] for r in rows), out


def test_loader_benchmark_reads_every_way_and_counts_the_classes_per_batch(capsys, tmp_path):
    """benchmarks/loader.py at a tiny size (synthetic images): every mode reads its epochs, and the
    class mix of streamed windows dealt from the whole split is near the in-memory path's, where the
    earlier windows of two 8-chunk runs hold one or two classes per batch."""
    from benchmarks.loader import main as loader

    loader(["--n", "2304", "--size", "16", "--photos", str(tmp_path / "none"), "--window-gb", "0"])
    out = capsys.readouterr().out
    classes = {mode: float(m) for mode, m in re.findall(r"zarr loader, (.+?), epochs 1-3\s*:.*?([\d.]+) classes per batch", out)}
    assert set(classes) == {"streaming, random units", "streaming, 2 runs of 8 chunks (before)", "in memory"}, out
    assert classes["streaming, random units"] >= 0.95 * classes["in memory"] and classes["in memory"] > 8.0, out
    assert classes["streaming, 2 runs of 8 chunks (before)"] < 3.0, out
