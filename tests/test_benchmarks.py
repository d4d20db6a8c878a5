"""The GPU throughput benchmark runs every path at CPU small scale and judges the issue's goals."""

from __future__ import annotations

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
