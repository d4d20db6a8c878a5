"""The Snakefile end to end on a tiny config, one-target regeneration, and the dry-run graph."""

import shutil
import subprocess
import sys

import pytest

from .conftest import ROOT, SHARED
from .test_generation import store_digest


def snakemake(*args, cwd=ROOT, timeout=900):
    proc = subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout + proc.stderr


VGG = SHARED / "models" / "vgg_normalised.pth"


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """The tiny workflow; with the shared VGG weights also ReBias Table 2's texture analysis."""
    results = tmp_path_factory.mktemp("wf") / "results"
    configs = ["tests/data/tiny.yaml"]
    if VGG.exists():
        extra = results.parent / "texture.yaml"
        extra.write_text(f"analyses: {{texture: {{vgg: {str(VGG)!r}}}}}\n")
        configs.append(str(extra))
    snakemake("all", "--cores", "2", "--configfile", *configs, "--config", f"results={results}")
    return results


def test_tiny_workflow_produces_the_report(tiny_run):
    report = (tiny_run / "report" / "report.md").read_text()
    assert "Table 2" in report and "Base (IN9)" in report and "Base (MR)" in report and "(paper)" in report
    for section in ("| CLAD+ |", "| CLAD (Trivial) |", "Table 3", "Table 4", "Table 5", "Table 6", "Fig. 6", "Fig. 7",
                    "Fig. 8", "BG-GAP of Base (IN9)"):
        assert section in report, section
    for section in ("Table 1 – rebias_mnist", "| ρ = 0.997 (paper) |", "Does ReBias beat Vanilla on unbiased accuracy",
                    "Fig. 3 – rebias_mnist", "Fig. 4 – rebias_mnist"):
        assert section in report, section
    for name in ("report.html", "metrics.csv", "fig5_mixed_same_vs_rand.png", "variant_grid.png",
                 "segmentation_quality.png", "fig6_saliency.png", "fig7_lambda.png", "fig8_queue_size.png",
                 "fig3_rebias_mnist_cells.png", "fig4_rebias_mnist_curves.png"):
        assert (tiny_run / "report" / name).stat().st_size > 0
    assert (tiny_run / "runs" / "base_mr" / "seed0" / "eval.jsonl").exists()
    assert (tiny_run / "runs" / "clad_lambda_0p5" / "seed0" / "model.pt").exists()
    assert not (tiny_run / "runs" / "clad_queue_size_32").exists()  # the base run is reused
    # every method of the grid, on every train variant, in one job per (variant, seed)
    for method in ("vanilla", "biased", "hex", "learned_mixin", "rubi", "rebias"):
        for variant in ("rho_0.99", "rho_0.997"):
            assert (tiny_run / "runs" / f"rebias_mnist_{method}_{variant}" / "seed0" / "eval.jsonl").exists()


def test_tiny_workflow_rebias_table2_on_images(tiny_run):
    report = (tiny_run / "report" / "report.md").read_text()
    table = report[report.index("Table 2 (ReBias)"):]
    rebias_row = next(line for line in table.splitlines() if line.startswith("| ReBias |"))
    biased, unbiased = rebias_row.split("|")[2:4]
    assert float(biased) >= 0
    if not VGG.exists():
        pytest.skip(f"{VGG} is absent: the texture-cluster column needs the shared VGG weights")
    assert 0 <= float(unbiased) <= 100
    assert (tiny_run / "analysis" / "texture.jsonl").stat().st_size > 0


def test_one_variant_regenerates_byte_identical(tiny_run):
    store = tiny_run / "datasets" / "in9" / "mixed_rand.zarr"
    before = store_digest(store)
    shutil.rmtree(store)
    snakemake(str(store), "--cores", "1", "--configfile", "tests/data/tiny.yaml", "--config", f"results={tiny_run}")
    assert store_digest(store) == before


def test_dry_run_lists_the_whole_graph():
    out = snakemake("-n", "--cores", "32", "--config", "results=/nonexistent/results")
    for rule in ("in9_synthetic_source", "in9_segment", "in9_variant", "biased_mnist_variant", "train",
                 "train_grid_rebias_mnist", "evaluate", "analysis", "analysis_saliency", "report", "all"):
        assert rule in out, rule
