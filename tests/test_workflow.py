"""What a config edit reruns and one-target regeneration (on the paper configs' smoke run,
`conftest.paper_smoke`), and the dry-run graphs of the default, real-data and SLURM configurations."""

import json
import re
import shutil
import subprocess
import sys

import pytest
import torch

from .conftest import ROOT
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


def test_a_report_key_reruns_only_the_report(paper_smoke, tmp_path):
    results, args = paper_smoke
    assert planned(snakemake("-n", "all", "--cores", "2", *args)) == {}
    edit = tmp_path / "report.yaml"
    edit.write_text("report: {grid_images: 1}\n")  # smoke mode caps it at 2: 1 is a real edit
    configs, rest = args[:args.index("--config")], args[args.index("--config"):]
    assert planned(snakemake("-n", "all", "--cores", "2", *configs, str(edit), *rest)) == {"report": 1, "all": 1}


def test_a_stylization_edit_remakes_only_the_stylized_store_and_the_runs_reading_it(paper_smoke, tmp_path):
    """alpha of Stylized IN-9: its shard and gather rerun, the runs trained on it or reading it
    (Base (SIN9), S-CLAD, S-CLAD+) retrain, every IN-9 model is rescored (the test set changed);
    the segmentation, the other variants, ImageNet-100 and the other runs are untouched."""
    results, args = paper_smoke
    edit = tmp_path / "stylized.yaml"
    edit.write_text("datasets: {in9: {stylized: {alpha: 0.5}}}\n")
    configs, rest = args[:args.index("--config")], args[args.index("--config"):]
    jobs = planned(snakemake("-n", "all", "--cores", "2", *configs, str(edit), *rest))
    assert jobs["in9_stylized_shard"] == 1 and jobs["in9_derived"] == 1 and jobs["train"] == 3
    assert not {"in9_segment_shard", "in9_segment", "in9_variant", "in9_texture_shard", "in9_external"} & set(jobs)


def test_one_experiments_optimiser_reruns_exactly_its_runs_and_their_readers(paper_smoke, tmp_path):
    """An IN-9 run's optimiser: its training, scoring, the analyses reading it and the report (planned);
    an ImageNet-100 run's (which no analysis reads) is rerun for real and its weights change."""
    results, args = paper_smoke
    configs, rest = args[:args.index("--config")], args[args.index("--config"):]
    edit = tmp_path / "optimiser.yaml"
    edit.write_text("experiments: {base_in9: {method: erm, dataset: in9, train_variant: original, label: Base (IN9),"
                    " training: {optimizer: {name: sgd, lr: 0.5}}}}\n")
    assert planned(snakemake("-n", "all", "--cores", "2", *configs, str(edit), *rest)) == {
        "train": 1, "evaluate": 1, "evaluate_official": 1, "analysis": 2, "analysis_saliency": 1, "report": 1, "all": 1}
    edit.write_text("experiments: {in100_byol: {training: {optimizer: {lr: 0.5}}}}\n")
    args = ["all", "--cores", "2", *configs, str(edit), *rest]
    assert planned(snakemake("-n", *args)) == {"train": 1, "evaluate": 1, "report": 1, "all": 1}
    model = results / "runs" / "in100_byol" / "seed0" / "model.pt"
    before = torch.load(model, weights_only=False)
    snakemake(*args)
    after = torch.load(model, weights_only=False)
    assert after["run_config"]["training"]["optimizer"]["lr"] == 0.5
    key = "network.backbone.conv1.weight"
    assert not torch.equal(before["state_dict"][key], after["state_dict"][key])
    assert planned(snakemake("-n", *args)) == {}


def test_one_variant_regenerates_byte_identical(paper_smoke):
    results, args = paper_smoke
    store = results / "datasets" / "in9" / "mixed_rand.zarr"
    before = store_digest(store)
    shutil.rmtree(store)
    snakemake(str(store), "--cores", "1", *args)
    assert store_digest(store) == before


def test_dry_run_lists_the_whole_graph(tmp_path):
    jobs = planned(snakemake("-n", "--cores", "32", "--config", f"results={tmp_path}"))
    for rule in ("in9_synthetic_source", "in9_list", "in9_segment_shard", "in9_segment", "in9_variant",
                 "dataset_variant", "train", "train_rebias_mnist", "evaluate", "evaluate_rebias_mnist", "analysis",
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
    assert {rule for rule, res in blocks if "gpu=1" in res} >= {"train", "train_rebias_mnist", "evaluate", "evaluate_rebias_mnist",
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
