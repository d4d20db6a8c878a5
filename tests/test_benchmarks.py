"""The benchmarks run: the GPU throughput benchmark every path at CPU small scale, judging its goals;
the demo's per-rule and per-phase accounting on a finished run's files."""

from __future__ import annotations

import json
import re

from benchmarks.gpu_throughput import goal_lines, main


def test_gpu_throughput_cpu_small_scale_prints_table_and_goals(tmp_path, capsys):
    # no photos folder: the synthetic renders stand in, so the test does not need ../shared
    main(["--device", "cpu", "--methods", "erm,clad,plain", "--size", "32", "--batch", "8", "--steps", "1",
          "--warmup", "0", "--workers", "1", "--photos", str(tmp_path / "none")])
    out = capsys.readouterr().out
    assert "CPU small-scale run" in out and "NOT GPU figures" in out
    assert "synthetic renders" in out
    rows = {line.split()[0]: line for line in out.splitlines() if line.split()[:1] in (["erm"], ["clad"], ["plain"])}
    assert set(rows) == {"erm", "clad", "plain"}
    assert "resnet50" in rows["erm"] and "in memory" in rows["erm"] and "DataLoader, 1 workers" in rows["plain"]
    assert rows["erm"].split()[-3] == "1.00x"  # ERM's cost relative to itself
    for line in ("our ERM / plain loop images/s:", "data wait share: max", "cost relative to ERM", "CLAD / ERM:"):
        assert line in out


def test_goal_verdicts():
    def row(images_per_s, wait):
        return {"images_per_s": images_per_s, "wait_share": wait}

    lines = goal_lines({"erm": row(130.0, 0.01), "clad": row(60.0, 0.06), "plain": row(100.0, 0.3),
                        "plain_amp": row(90.0, 0.2)})
    assert lines[0].startswith("our ERM / plain loop images/s: 1.30x against plain") and lines[0].endswith(": met")
    assert lines[1] == "data wait share: max 6.0 % (clad); goal <= 5 % for every method: NOT met (clad)"
    assert lines[2] == "cost relative to ERM (ERM's images/s / the method's): clad 2.17x"
    assert lines[3] == "CLAD / ERM: 2.17x; goal <= 2.1x: NOT met"


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
    from core.phases import phase, summary

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
    """The calibration benchmark's last line on 300 seeded repetitions: today's comparison (paired over
    seeds and images) says "higher" or "lower" where nothing differs about as often as its 95 % level
    promises, and detects Ge et al.'s effect; the earlier rule, on the same draws, almost never does."""
    import sys

    from benchmarks.statistics_calibration import main as calibration

    monkeypatch.setattr(sys, "argv", ["statistics_calibration", "--repetitions", "300"])
    calibration()
    out = capsys.readouterr().out
    fpr, power = map(float, re.fullmatch(r"fpr=([\d.]+) power=([\d.]+)", out.strip().splitlines()[-1]).groups())
    assert 1.0 <= fpr <= 10.0 and power >= 80.0, out
    old = re.search(r"independent image errors\s+false positives\s+([\d.]+) %\s+power\s+([\d.]+) %", out)
    assert float(old.group(2)) < 50.0, out


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
