"""`arch: timm/<name>`: a timm model by name with the user's weights file and checksum trains and
scores; a wrong name, a missing file or a wrong checksum stops, naming the key or the file."""

from __future__ import annotations

import copy

import pytest
import torch

from debias_workbench.core.provenance import file_digest
from debias_workbench.training.evaluation import evaluate_run
from debias_workbench.training.models import build_network
from debias_workbench.training.weights import WeightsError
from debias_workbench.training.trainer import train
from debias_workbench.workflow.config import ConfigError, resolve_config
from debias_workbench.workflow.slices import evaluation_config, run_config
from debias_workbench.workflow.user_paths import missing_paths


def _weights(tmp_path, suffix: str):
    """A timm ResNet-50's weights (random, with its 1000-class classifier) saved as the user would have them."""
    import timm

    state = timm.create_model("resnet50", pretrained=False).state_dict()
    path = tmp_path / f"resnet50{suffix}"
    if suffix == ".safetensors":
        from safetensors.torch import save_file

        save_file({k: v.contiguous() for k, v in state.items()}, str(path))
    else:
        torch.save(state, path)
    return path, state


@pytest.mark.parametrize("suffix", [".safetensors", ".pth"])
def test_a_timm_resnet50_with_a_local_weights_file_trains_and_scores(tmp_path, tiny_store, default_config, suffix):
    path, state = _weights(tmp_path, suffix)
    cfg = copy.deepcopy(default_config)
    cfg["training"].update(arch="timm/resnet50", pretrained=str(path), pretrained_sha256=file_digest(path, "sha256"),
                           batch_size=6)
    cfg = resolve_config({**cfg, "smoke": True})  # smoke mode: one short epoch
    assert cfg["training"]["arch"] == "timm/resnet50" and cfg["training"]["epochs"] == 1
    run = run_config(cfg, "base_in9", 0)
    net = build_network(run["training"]["arch"], 9, run["training"])
    assert torch.equal(net.backbone.conv1.weight, state["conv1.weight"]) and net.head.out_features == 9
    assert net.feature_map(torch.zeros(2, 3, 32, 32)).shape[:2] == (2, 2048)
    model = train(run, tiny_store, tmp_path / "run")
    rows = evaluate_run(model, evaluation_config(cfg), {"original": tiny_store})
    assert rows[0]["metric"] == "accuracy" and 0 < rows[0]["n"] <= 18 and 0 <= rows[0]["value"] <= 100


def test_a_wrong_timm_name_file_or_checksum_stops_naming_it(tmp_path, default_config):
    cfg = copy.deepcopy(default_config)
    cfg["experiments"]["clad"]["training"] = {"arch": "timm/resnet5O"}
    with pytest.raises(ConfigError, match=r"experiments.clad.training.arch: timm has no model 'resnet5O'"):
        resolve_config(cfg)
    cfg = copy.deepcopy(default_config)
    cfg["training"].update(arch="timm/resnet50", pretrained=str(tmp_path / "absent.safetensors"))
    assert any(p.startswith("training.pretrained") for p in missing_paths(cfg))
    path, _ = _weights(tmp_path, ".safetensors")
    with pytest.raises(WeightsError, match=r"resnet50.safetensors has sha256 .*, expected 00"):
        build_network("timm/resnet50", 9, {"pretrained": str(path), "pretrained_sha256": "00" * 32})
    with pytest.raises(WeightsError, match=r"does not fit timm/resnet18"):
        build_network("timm/resnet18", 9, {"pretrained": str(path)})


def test_a_timm_model_without_a_pooled_feature_map_trains_but_refuses_feature_maps():
    """MobileNetV3's pooled features come after a head convolution: the head takes their width, and
    methods that read feature maps are told which models have one."""
    net = build_network("timm/mobilenetv3_small_050", 9, {})
    assert net(torch.zeros(2, 3, 64, 64)).shape == (2, 9)
    with pytest.raises(WeightsError, match=r"timm/mobilenetv3_small_050 has no feature map whose average"):
        net.feature_map(torch.zeros(2, 3, 64, 64))
    assert build_network("timm/resnet18", 9, {}).pools_its_map
