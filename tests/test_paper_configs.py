"""Every paper config, run end to end in smoke mode on real-shaped stand-ins of the user's files.

The configs keep their architectures (ResNet-50 / ResNet-18 / BagNet-18 at 224 px, SimpleConvNet
on 28-px digits), methods, losses, queue sizes and pretrained file; `smoke: true` shrinks only
the counts (debias_workbench/workflow/smoke.py). One Snakemake run covers them all, as a user gives them on one
command line, so the first run on a cluster is never the first run ever.
"""

import re
from pathlib import Path

import pytest
import torch
import yaml

from debias_workbench.workflow.config import deep_merge
from debias_workbench.workflow.user_paths import named_paths

from .conftest import PAPER_CONFIGS, ROOT
from .standins import write_paper_paths
from .test_workflow import planned, snakemake


@pytest.fixture(scope="module")
def standin_paths(tmp_path_factory) -> dict:
    return yaml.safe_load(write_paper_paths(tmp_path_factory.mktemp("files"), None).read_text())


@pytest.mark.parametrize("config", PAPER_CONFIGS)
def test_each_paper_config_plans_to_its_report_alone(config, standin_paths, tmp_path):
    """Each config on its own (with the stand-in paths of its own datasets) plans to its report."""
    own = set(yaml.safe_load((ROOT / config).read_text()).get("datasets", {})) | {"in9", "biased_mnist", "colored_mnist"}
    mine = {k: v for k, v in standin_paths.items() if k != "evaluation"}  # the official 224-px images: IN-9 at 224
    if config == "config/imagenet9.yaml":
        own, mine["evaluation"] = own | {"official"}, standin_paths["evaluation"]
    paths = tmp_path / "paths.yaml"
    grids = set(yaml.safe_load((ROOT / config).read_text()).get("grids", {}))
    paths.write_text(yaml.safe_dump({**mine, "datasets": {k: v for k, v in standin_paths["datasets"].items() if k in own},
                                     "grids": {k: v for k, v in standin_paths["grids"].items() if k in grids}}))
    out = snakemake("-n", "all", "--cores", "32", "--configfile", config, str(paths),
                    "--config", f"results={tmp_path / 'results'}")
    jobs = planned(out)
    assert jobs["report"] == 1 and jobs["all"] == 1
    # every file a job reads is the workflow's own or one the config names, which is checked before the
    # graph is built (workbench.user_paths): no job can lack an input that an old output would stand in for
    merged = deep_merge(deep_merge(yaml.safe_load((ROOT / "config" / "config.yaml").read_text()),
                                   yaml.safe_load((ROOT / config).read_text())), yaml.safe_load(paths.read_text()))
    named = [Path(p) for p in named_paths(merged).values()]
    for line in re.findall(r"^    input: (.+)$", out, re.M):
        for path in map(Path, line.replace("<TBD>", "").split(", ")):   # <TBD>: after the listing checkpoint
            if not str(path) or str(path) == ".":
                continue
            assert path.is_relative_to(tmp_path / "results-smoke") or any(
                path == n or path.is_relative_to(n) for n in named), path


def test_every_paper_config_reaches_its_report(paper_smoke):
    results, args = paper_smoke
    report = (results / "report" / "report.md").read_text()
    assert report.splitlines()[2].startswith("**Smoke run**")
    # the report names what it was built from: config.yaml, then the files in the order given, and the hash
    files = " + ".join(f"`{f}`" for f in ["config/config.yaml", *args[1:args.index("--config")]])
    assert f"Built from the config {files}" in report and "resolved config SHA-256 `" in report
    assert "224×224 px" in report  # imagenet9.yaml: CLAD and its baselines on 224-px IN-9
    for row in ("| Base (IN9) |", "| Base (MR) |", "| CLAD |", "| CLAD+ |", "| CLAD (Trivial) |", "| S-CLAD |",
                "| ReBias |", "| LearnedMixin+H |", "| MoCo-v2 (IN-100) |", "| BYOL + patch α = 0.05 (IN-100) |"):
        assert row in report, row
    for row in ("| MoCo-v2 |", "| BYOL + patch α = 0.05 |"):  # the demo's IN-9 rows: no paper config's table (scope)
        assert row not in report, row
    for section in ("Table 2 –", "Table 3", "Table 4", "Table 6", "Fig. 6", "Fig. 7", "Fig. 8", "BG-GAP of Base (IN9)",
                    "Capability check: Base (MR) reaches", "Background Challenge, official test images",
                    "Table 1 – rebias_mnist", "Fig. 3 – rebias_mnist", "Fig. 4 – rebias_mnist", "Table 2 (ReBias)",
                    "Table 1 on ImageNet-100", "Table 7 – S-CLAD", "Shape bias"):
        assert section in report, section
    for grid in ("park_waterbirds", "park_bffhq", "park_bar", "park_cmnist", "Table 3 (ablation) – park_ablation"):
        assert grid in report, grid
    # each paper config's protocol table (debias_workbench/workflow/protocol.py), above its paper's tables
    for title in ("Protocol: CLAD (Wang et al., BMVC 2022)", "Protocol: Ge et al. (NeurIPS 2021)",
                  "Protocol: ReBias (Bahng et al., ICML 2020)", "Protocol: Park et al. (CVPR 2024) Table 1",
                  "Protocol: Park et al. (CVPR 2024) Table 3"):
        assert title in report, title
    assert report.index("Protocol: CLAD (Wang et al.") < report.index("Table 2 –")
    assert "| learning rate, BAR | `1e-05` | `1e-05` |" in report
    for name in ("report.html", "metrics.csv", "fig5_mixed_same_vs_rand.png", "variant_grid.png", "fig6_saliency.png",
                 "fig7_lambda.png", "fig8_queue_size.png", "fig3_rebias_mnist_cells.png", "ssl_similarity_imagenet100.png"):
        assert (results / "report" / name).stat().st_size > 0, name
    assert (results / "analysis" / "texture.jsonl").stat().st_size > 0  # ReBias Table 2's texture clusters
    run = torch.load(results / "runs" / "clad" / "seed0" / "model.pt", map_location="cpu", weights_only=False)
    assert run["run_config"]["training"]["arch"] == "resnet50" and run["run_config"]["dataset_config"]["image_size"] == 224
    assert run["run_config"]["training"]["pretrained"].endswith("resnet50-random.pth")
    ssl = torch.load(results / "runs" / "in100_moco" / "seed0" / "model.pt", map_location="cpu", weights_only=False)
    assert len(ssl["classes"]) == 100 and ssl["run_config"]["method_args"]["queue_size"] == 16384
