"""ImageNet-100 (Ge et al. Table 1): the packaged CMC class list, the dataset built from an ImageNet
tree through the in9 family's steps (original, Stylized with class-free paintings, texture,
corrupted, ImageNet-Sketch / -R read as released), its config, its checks and its report table."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest
import yaml
import zarr

from debias_workbench.core.errors import PipelineError
from debias_workbench.pipeline.datasets import get_family
from debias_workbench.pipeline.sources.imagenet_subset import cmc_imagenet100_wnids
from debias_workbench.pipeline.variants import EXTERNAL

from .conftest import ROOT, SHARED
from .standins import make_imagenet_tree

CONFIG = ROOT / "config" / "imagenet100_ssl.yaml"


def test_the_packaged_list_is_cmcs_100_wnids_and_the_configs_classes():
    wnids = cmc_imagenet100_wnids()
    assert len(wnids) == 100 == len(set(wnids)) and all(w.startswith("n") and len(w) == 9 for w in wnids)
    header = (ROOT / "debias_workbench" / "pipeline" / "sources" / "imagenet100_cmc.txt").read_text().splitlines()[:3]
    assert "HobbitLong/CMC" in " ".join(header) and "imagenet100.txt" in " ".join(header)
    classes = yaml.safe_load(CONFIG.read_text())["datasets"]["imagenet100"]["classes"]
    assert classes == [f"{i:02d}_{w}" for i, w in enumerate(sorted(wnids))]


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    photos = SHARED / "data" / "in9-photos-dev"
    root = make_imagenet_tree(tmp_path_factory.mktemp("imagenet"), photos if photos.is_dir() else None)
    (root / "val" / sorted(cmc_imagenet100_wnids())[0] / "ILSVRC2012_val_99999999.JPEG").write_bytes(b"not a jpeg")
    return root


def small_config(tree: Path) -> dict:
    """The config's dataset at 64 px (the training photos at 72), pointed at the stand-in tree."""
    cfg = copy.deepcopy(yaml.safe_load(CONFIG.read_text())["datasets"]["imagenet100"])
    cfg.update(image_size=64, view_source_size=72, chunk_images=4, block_images=8)
    cfg["source"]["imagenet_subset"]["root"] = str(tree)
    cfg["external"] = {"imagenet_sketch": str(tree / "sketch"), "imagenet_r": str(tree / "imagenet-r")}
    cfg["stylized"].update(work_size=64, batch_images=8)
    cfg["stylized"]["styles"].update(root=str(tree / "paintings"), size=64)
    cfg["texture"].update(splits=["val"], work_size=64)
    return cfg


@pytest.fixture(scope="module")
def built(tree, tmp_path_factory) -> tuple[dict, Path]:
    cfg = small_config(tree)
    out = tmp_path_factory.mktemp("in100")
    family = get_family("in9")
    family.run_step("segment", cfg, 0, out / "segmented.zarr", [], 1)
    seg = [out / "segmented.zarr", out / "segmented.manifest.json"]
    for variant in family.variants(cfg):
        inputs = [Path(cfg["external"][variant])] if variant in EXTERNAL else seg
        family.run_step("variant", cfg, 0, out / f"{variant}.zarr", inputs, 1, variant)
    return cfg, out


def test_every_store_builds_and_images_in_equal_images_out_plus_skipped(tree, built):
    cfg, out = built
    assert get_family("in9").variants(cfg) == ["original", "stylized", "texture", "corrupted", "imagenet_sketch",
                                               "imagenet_r"]
    classes = cfg["classes"]
    on_disk = {split: sum(1 for c in classes for _ in (tree / split / c.split("_", 1)[1]).iterdir())
               for split in ("train", "val")}
    for variant in get_family("in9").variants(cfg):
        manifest = json.loads((out / f"{variant}.manifest.json").read_text())
        group = zarr.open_group(out / f"{variant}.zarr", mode="r")
        assert group.attrs["classes"] == classes
        for split, m in manifest.items():
            assert m["inputs"] == m["outputs"] + len(m["skipped"]), (variant, split)
            side = 72 if (variant, split) == ("original", "train") else 64  # train_views: photo
            assert group[split]["images"].shape == (m["outputs"], side, side, 3)
            labels = group[split]["labels"][:]
            ids = group[split]["ids"][:]
            # every image is labelled by its folder's wnid
            assert all(classes[y] == i.split("/")[1] for y, i in zip(labels, ids))
    original = json.loads((out / "original.manifest.json").read_text())
    assert original["train"]["inputs"] == on_disk["train"] and original["val"]["inputs"] == on_disk["val"]
    assert [s["reason"] for s in original["val"]["skipped"]] == [original["val"]["skipped"][0]["reason"]]
    assert "cannot decode" in original["val"]["skipped"][0]["reason"]
    assert set(json.loads((out / "stylized.manifest.json").read_text())) == {"val"}    # the config's splits
    stylized = zarr.open_group(out / "stylized.zarr", mode="r")["val"]
    assert (stylized["bias_labels"][:] == -1).all()                                     # class-free paintings
    assert set(stylized["style_ids"][:]) <= {f"painting_{j}.jpg" for j in range(3)}
    corrupted = zarr.open_group(out / "corrupted.zarr", mode="r")
    assert len(corrupted.attrs["corruptions"]) == 15                                    # ImageNet-C's test set
    assert corrupted["val"]["severity"].shape[0] == original["val"]["outputs"]
    for variant in ("imagenet_sketch", "imagenet_r"):
        m = json.loads((out / f"{variant}.manifest.json").read_text())["val"]
        assert m["outputs"] == m["classes_found"] == 4 and m["ignored_class_folders"] == 1 == m["ignored_entries"]
        assert (zarr.open_group(out / f"{variant}.zarr", mode="r")["val"]["bias_labels"][:] == -1).all()


def test_missing_folders_stop_the_listing_naming_them(tree, tmp_path):
    from debias_workbench.pipeline.sources import list_source_items

    cfg = small_config(tree)
    broken = tmp_path / "imagenet"
    shutil.copytree(tree / "train", broken / "train")
    cfg["source"]["imagenet_subset"]["root"] = str(broken)
    with pytest.raises(PipelineError, match=r"imagenet/val does not exist.*train/<wnid>/"):
        list_source_items(cfg["source"], cfg["classes"])
    shutil.copytree(tree / "val", broken / "val")
    gone = sorted(cmc_imagenet100_wnids())[5]
    shutil.rmtree(broken / "val" / gone)
    with pytest.raises(PipelineError, match=rf"1 of the 100 class folders are missing in .*val: {gone}; place"):
        list_source_items(cfg["source"], cfg["classes"])
    with pytest.raises(PipelineError, match="external.imagenet_r folder .*nowhere does not exist"):
        get_family("in9").run_step("variant", cfg, 0, tmp_path / "r.zarr", [tmp_path / "nowhere"], 1, "imagenet_r")


def _full_config(*names: str) -> dict:
    from debias_workbench.workflow.config import deep_merge

    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    for name in names:
        cfg = deep_merge(cfg, yaml.safe_load((ROOT / "config" / name).read_text()))
    return cfg


def test_the_config_trains_from_scratch_at_the_papers_settings_alone_and_beside_imagenet9():
    from debias_workbench.workflow.config import resolve_config
    from debias_workbench.workflow.slices import run_config

    for names in (("imagenet100_ssl.yaml",), ("imagenet9.yaml", "imagenet100_ssl.yaml")):
        cfg = resolve_config(_full_config(*names))
        for name in ("in100_moco", "in100_moco_texture2", "in100_moco_patch2", "in100_moco_patch3", "in100_byol",
                     "in100_byol_patch"):
            exp = cfg["experiments"][name]
            run = run_config(cfg, name, 0)
            assert exp["seeds"] == [0, 1, 2] and exp["eval_dataset"] == "imagenet100" == run["dataset"]
            assert run["training"]["pretrained"] is None and run["training"]["arch"] == "resnet50"
            assert (run["training"]["epochs"], run["training"]["batch_size"]) == (200, 128)
            assert run["training"]["optimizer"] == {"name": "sgd", "lr": 0.03, "weight_decay": 0.0001, "momentum": 0.9}
            if exp["method"].startswith("moco"):
                assert (run["method_args"]["queue_size"], run["method_args"]["tau"]) == (16384, 0.2)
        assert run_config(cfg, "in100_moco_patch3", 0)["method_args"]["alpha"] == 3.0


def test_the_checks_name_what_imagenet100_cannot_do():
    from debias_workbench.workflow.config import ConfigError, validate_config

    cfg = _full_config("imagenet100_ssl.yaml")
    bad = copy.deepcopy(cfg)
    bad["datasets"]["imagenet100"]["variants"].append("mixed_rand")
    with pytest.raises(ConfigError, match=r"datasets\.imagenet100\.variants: \['mixed_rand'\] are made from the "
                                          "foreground mask"):
        validate_config(bad)
    bad = copy.deepcopy(cfg)
    del bad["experiments"]["in100_moco"]["eval_dataset"]
    with pytest.raises(ConfigError, match=r"experiments\.in100_moco: trained on 'imagenet100' \(100 classes\) but "
                                          r"scored on 'in9' \(9 classes\); set experiments\.in100_moco\.eval_dataset"):
        validate_config(bad)
    bad = copy.deepcopy(cfg)
    bad["experiments"]["in100_moco"]["train_variant"] = "imagenet_r"
    bad["datasets"]["imagenet100"]["external"]["imagenet_r"] = "/data/imagenet-r"
    with pytest.raises(ConfigError, match=r"in100_moco\.train_variant: 'imagenet_r' is a test set read as released"):
        validate_config(bad)


def test_the_report_writes_table_1_for_imagenet100_beside_the_papers_rows(tmp_path):
    from debias_workbench.papers.paper import load_numbers
    from debias_workbench.papers.ssl_negatives.tables import dataset_sections
    from debias_workbench.report.context import accuracy_table
    from debias_workbench.report.document import Document

    cfg = _full_config("imagenet100_ssl.yaml")
    cfg["datasets"]["imagenet100"]["external"]["imagenet_sketch"] = "/data/sketch"
    rows = [{"kind": "eval", "experiment": e, "seed": s, "dataset": "imagenet100", "metric": "accuracy",
             "variant": v, "value": value + s, "n": 100}
            for e, value in (("in100_moco", 70.0), ("in100_moco_patch2", 72.0)) for s in (0, 1, 2)
            for v in ("original", "corrupted", "stylized", "texture", "imagenet_sketch")]
    labels = {name: exp["label"] for name, exp in cfg["experiments"].items()}
    paper = load_numbers("debias_workbench.papers.ssl_negatives")
    doc = Document("t")
    dataset_sections(doc, cfg, "imagenet100", accuracy_table(rows, labels), rows, paper, tmp_path)
    md = doc.markdown()
    assert "Table 1 on ImageNet-100 (dataset `imagenet100`)" in md
    assert ("| Type | Model (ResNet-50, linear probe) | ImageNet-100 val ↑ | ImageNet-100-C ↑ | ImageNet-S ↑ | "
            "Stylized ↑ | ImageNet-100-Texture |") in md                  # ImageNet-R is not given: no column
    assert "| Ours (this run) | MoCo-v2 (IN-100) |" + " 71.0 ± 1.0 |" * 5 in md
    assert ("| (paper) | + Patch-based α = 2 | 79.35 ± 0.12 | 45.13 ± 0.35 | 31.76 ± 0.88 | 17.37 ± 0.19 | – |"
            in md)
    # +2 points on every seed, but each run saw 100 test images (a binomial error of ~4.5 points): not judged
    assert "chance 1.0 %" in md and ("MoCo-v2 + patch α = 2 (IN-100) vs MoCo-v2 (IN-100): original cannot tell: "
                                     "+2.0 points (95 % CI") in md
