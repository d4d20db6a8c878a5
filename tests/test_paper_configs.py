"""Every paper config, run end to end in smoke mode on real-shaped stand-ins of the user's files.

The configs keep their architectures (ResNet-50 / ResNet-18 / BagNet-18 at 224 px, SimpleConvNet
on 28-px digits), methods, losses, queue sizes and pretrained file; `smoke: true` shrinks only
the counts (workbench/smoke.py). One Snakemake run covers them all, as a user gives them on one
command line, so the first run on a cluster is never the first run ever.
"""

import pytest

from .conftest import SHARED
from .standins import write_paper_paths
from .test_workflow import planned, snakemake

PAPER_CONFIGS = ["config/imagenet9.yaml", "config/biased_mnist_paper.yaml", "config/park_real_data.yaml",
                 "config/park_ablation.yaml", "config/imagenet100_ssl.yaml"]
PHOTOS = SHARED / "data" / "in9-photos-dev"  # real photos when present; drawn stand-ins otherwise


@pytest.fixture(scope="module")
def paper_smoke(tmp_path_factory):
    root = tmp_path_factory.mktemp("paper")
    paths = write_paper_paths(root, PHOTOS if PHOTOS.exists() else None)
    snakemake("all", "--cores", "2", "--configfile", *PAPER_CONFIGS, str(paths),
              "--config", f"results={root / 'results'}", timeout=1500)
    return root / "results-smoke"


@pytest.mark.parametrize("config", PAPER_CONFIGS)
def test_each_paper_config_plans_to_its_report_alone(config, tmp_path):
    paths = write_paper_paths(tmp_path / "files", None) if config != "config/park_ablation.yaml" else None
    jobs = planned(snakemake("-n", "all", "--cores", "32", "--configfile", config,
                             *([str(paths)] if paths else []), "--config", f"results={tmp_path / 'results'}"))
    assert jobs["report"] == 1 and jobs["all"] == 1


def test_every_paper_config_reaches_its_report(paper_smoke):
    report = (paper_smoke / "report" / "report.md").read_text()
    assert report.splitlines()[2].startswith("**Smoke run**")
    assert "224×224 px" in report  # imagenet9.yaml: CLAD and its baselines on 224-px IN-9
    for row in ("| Base (IN9) |", "| CLAD |", "| CLAD+ |", "| CLAD (Trivial) |", "| S-CLAD |", "| MoCo-v2 |",
                "| BYOL + patch α = 0.05 |", "| ReBias |", "| LearnedMixin+H |"):
        assert row in report, row
    for section in ("Table 1 – rebias_mnist", "Table 2", "Table 3", "Fig. 6", "Fig. 7", "Fig. 8"):
        assert section in report, section
    for grid in ("park_waterbirds", "park_bffhq", "park_bar", "park_cmnist", "park_ablation"):
        assert grid in report, grid
    model = paper_smoke / "runs" / "clad" / "seed0" / "model.pt"
    import torch

    run = torch.load(model, map_location="cpu", weights_only=False)["run_config"]
    assert run["training"]["arch"] == "resnet50" and run["dataset_config"]["image_size"] == 224
