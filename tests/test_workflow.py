"""The Snakefile end to end on a tiny config, what a config edit reruns, one-target
regeneration, and the dry-run graphs of the default, real-data and SLURM configurations."""

import json
import re
import shutil
import subprocess
import sys

import pytest
import torch

from .conftest import ROOT, SHARED
from .test_bg_challenge import make_official_folder, official_cfg
from .test_generation import store_digest


def snakemake(*args, cwd=ROOT, timeout=900, ok=True):
    proc = subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)
    if ok:
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def planned(output: str) -> dict[str, int]:
    """{rule: job count} of a dry run's job table ({} when nothing is to be done)."""
    if "Job stats:" not in output:
        return {}
    table = output.split("Job stats:", 1)[1].split("total", 1)[0]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)}


def job_blocks(output: str) -> list[tuple[str, str]]:
    """(rule, resources line) of every job a dry run lists."""
    return re.findall(r"^(?:rule|checkpoint|localrule) (\w+):\n(?:    .*\n)*?    resources: (.*)$", output, re.M)


VGG = SHARED / "models" / "vgg_normalised.pth"


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """The tiny workflow; with the shared VGG weights also ReBias Table 2's texture analysis."""
    results = tmp_path_factory.mktemp("wf") / "results"
    make_official_folder(results.parent / "bg_challenge")  # the released test images, scored as they are
    official = results.parent / "official.yaml"
    official.write_text(json.dumps({"datasets": {"official": official_cfg(results.parent / "bg_challenge")},
                                    "evaluation": {"official_dataset": "official"}}))
    configs = ["tests/data/tiny.yaml", str(official)]
    if VGG.exists():
        extra = results.parent / "texture.yaml"
        extra.write_text(f"analyses: {{texture: {{vgg: {str(VGG)!r}}}}}\n")
        configs.append(str(extra))
    snakemake("all", "--cores", "2", "--configfile", *configs, "--config", f"results={results}")
    TINY_CONFIGS[:] = configs
    return results


TINY_CONFIGS: list[str] = []  # the config files the tiny run was made with


def test_tiny_workflow_produces_the_report(tiny_run):
    report = (tiny_run / "report" / "report.md").read_text()
    assert "Table 2" in report and "Base (IN9)" in report and "Base (MR)" in report and "(paper)" in report
    for section in ("| CLAD+ |", "| CLAD (Trivial) |", "Table 3", "Table 4", "Table 5", "Table 6", "Fig. 6", "Fig. 7",
                    "Fig. 8", "BG-GAP of Base (IN9)", "Capability check: Base (MR) reaches",
                    "masks under 10 % of their box", "Background Challenge, official test images"):
        assert section in report, section
    for section in ("Table 1 – rebias_mnist", "| ρ = 0.997 (paper) |", "Does ReBias beat Vanilla on unbiased accuracy",
                    "Capability check: Vanilla reaches",
                    "Fig. 3 – rebias_mnist", "Fig. 4 – rebias_mnist"):
        assert section in report, section
    for name in ("report.html", "metrics.csv", "fig5_mixed_same_vs_rand.png", "variant_grid.png",
                 "segmentation_quality.png", "fig6_saliency.png", "fig7_lambda.png", "fig8_queue_size.png",
                 "fig3_rebias_mnist_cells.png", "fig4_rebias_mnist_curves.png"):
        assert (tiny_run / "report" / name).stat().st_size > 0
    assert (tiny_run / "runs" / "base_mr" / "seed0" / "eval.jsonl").exists()
    official = report[report.index("official test images"):]
    assert next(line for line in official.splitlines() if line.startswith("| Base (MR) |"))
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


def test_a_report_key_reruns_only_the_report(tiny_run, tmp_path):
    base = ["-n", "all", "--cores", "2", "--configfile", *TINY_CONFIGS]
    assert planned(snakemake(*base, "--config", f"results={tiny_run}")) == {}
    edit = tmp_path / "report.yaml"
    edit.write_text("report: {grid_images: 3}\n")
    assert planned(snakemake(*base, str(edit), "--config", f"results={tiny_run}")) == {"report": 1, "all": 1}


def test_a_stylization_edit_remakes_only_the_stylized_store_and_the_runs_reading_it(tiny_run, tmp_path):
    """alpha of Stylized IN-9: its shards and gather rerun, the runs trained on it or reading it
    (Base (SIN9), S-CLAD, S-CLAD+) retrain, every model is rescored (the test set changed); the
    segmentation, the other variants and the other runs are untouched."""
    args = ["all", "--cores", "2", "--configfile", *TINY_CONFIGS]
    assert planned(snakemake("-n", *args, "--config", f"results={tiny_run}")) == {}  # runs before any real edit
    edit = tmp_path / "stylized.yaml"
    edit.write_text("datasets: {in9: {stylized: {alpha: 0.5}}}\n")
    jobs = planned(snakemake("-n", *args, str(edit), "--config", f"results={tiny_run}"))
    assert jobs["in9_stylized_shard"] == 6 and jobs["in9_derived"] == 1 and jobs["train"] == 3
    assert not {"in9_segment_shard", "in9_segment", "in9_variant", "in9_texture_shard"} & set(jobs)


def test_one_experiments_optimiser_reruns_exactly_its_runs_and_their_readers(tiny_run, tmp_path):
    edit = tmp_path / "optimiser.yaml"
    edit.write_text("experiments: {base_in9: {method: erm, dataset: in9, train_variant: original, label: Base (IN9),"
                    " training: {optimizer: {name: sgd, lr: 0.5}}}}\n")
    args = ["all", "--cores", "2", "--configfile", *TINY_CONFIGS, str(edit), "--config", f"results={tiny_run}"]
    assert planned(snakemake("-n", *args)) == {"train": 1, "evaluate": 1, "evaluate_official": 1, "analysis": 2,
                                               "analysis_saliency": 1, "report": 1, "all": 1}
    model = tiny_run / "runs" / "base_in9" / "seed0" / "model.pt"
    before = torch.load(model)
    snakemake(*args)
    after = torch.load(model)
    assert {k: after["run_config"]["training"]["optimizer"][k] for k in ("name", "lr")} == {"name": "sgd", "lr": 0.5}
    assert not torch.equal(before["state_dict"]["network.head.weight"], after["state_dict"]["network.head.weight"])
    assert planned(snakemake("-n", *args)) == {}


def test_one_variant_regenerates_byte_identical(tiny_run):
    store = tiny_run / "datasets" / "in9" / "mixed_rand.zarr"
    before = store_digest(store)
    shutil.rmtree(store)
    snakemake(str(store), "--cores", "1", "--configfile", "tests/data/tiny.yaml", "--config", f"results={tiny_run}")
    assert store_digest(store) == before


def test_dry_run_lists_the_whole_graph(tmp_path):
    jobs = planned(snakemake("-n", "--cores", "32", "--config", f"results={tmp_path}"))
    for rule in ("in9_synthetic_source", "in9_list", "in9_segment_shard", "in9_segment", "in9_variant",
                 "labelled_variant", "train", "train_grid_rebias_mnist", "evaluate", "analysis",
                 "analysis_saliency", "report", "all"):
        assert rule in jobs, rule
    assert jobs["in9_segment_shard"] == 12  # 9 classes x 650 images in shards of block_images = 512


def test_slurm_dry_run_puts_every_gpu_job_on_the_gpu_partition(tmp_path):
    out = snakemake("-n", "--executor", "slurm", "--workflow-profile", "profiles/slurm", "all",
                    "--config", f"results={tmp_path}")
    blocks = [(rule, res) for rule, res in job_blocks(out) if rule != "all"]
    assert len(blocks) == sum(planned(out).values()) - 1
    for rule, res in blocks:
        gpu = "gpu=1" in res
        assert ("slurm_partition=gpu," in res) == gpu and ("slurm_partition=cpu," in res) != gpu, (rule, res)
        assert re.search(r"runtime=\d+", res) and re.search(r"mem_mb=\d+", res), (rule, res)
    assert {rule for rule, res in blocks if "gpu=1" in res} >= {"train", "train_grid_rebias_mnist", "evaluate",
                                                               "analysis", "analysis_saliency"}
    assert sum(rule == "in9_segment_shard" for rule, _ in blocks) == 12


def test_real_data_config_with_a_missing_root_fails_at_start_naming_it(tmp_path):
    out = snakemake("-n", "all", "--cores", "32", "--configfile", "config/imagenet9.yaml",
                    "--config", f"results={tmp_path}", ok=False)
    assert "/data/bg_challenge" in out and "Missing input files" in out


def test_real_data_config_dry_runs_on_a_folder(tmp_path):
    """config/imagenet9.yaml on an IN-9 folder: the listing checkpoint comes first, the rest is
    planned once it has run."""
    root = tmp_path / "bg_challenge"
    for cls in ("00_dog", "01_bird"):
        (root / "original" / "val" / cls).mkdir(parents=True)
    extra = tmp_path / "paths.yaml"
    extra.write_text(f"datasets: {{in9: {{source: {{in9_folder: {{root: {str(root)!r}, annotations: null}}}}}}}}\n")
    out = snakemake("-n", "all", "--cores", "32", "--configfile", "config/imagenet9.yaml", str(extra),
                    "--config", f"results={tmp_path / 'results'}", ok=False)
    assert "Missing input files for rule train" in out and "/models/resnet50-11ad3fa6.pth" in out  # the paper's
    weights = tmp_path / "resnet50.pth"                                    # pretrained ResNet-50 is required
    weights.write_bytes(b"stand-in")  # only its existence matters to the DAG
    styles = tmp_path / "textures"  # Stylized IN-9's style folder is an input too
    styles.mkdir()
    extra.write_text(json.dumps({"datasets": {"in9": {
        "source": {"in9_folder": {"root": str(root), "annotations": None}},
        "stylized": {"styles": {"kind": "folder", "root": str(styles), "size": 256}}}},
        "training": {"pretrained": str(weights)}}))
    jobs = planned(snakemake("-n", "all", "--cores", "32", "--configfile", "config/imagenet9.yaml", str(extra),
                             "--config", f"results={tmp_path / 'results'}"))
    assert jobs["in9_list"] == 1 and "train" in jobs and "in9_segment_shard" not in jobs  # shards: after the listing


def test_snakemake_lint_passes():
    out = snakemake("--lint", "--config", "results=/tmp/lint-results")
    assert "good condition" in out
