"""Datasets people take away: `load_variant` (a PyTorch dataset over one split of a store) and
`workbench export` (imagefolder, webdataset), read back with torchvision's and webdataset's own
readers: same count, same labels and bias labels, same pixels; a tampered store is not exported."""

from __future__ import annotations

import csv
import shutil

import numpy as np
import pytest
import torch
import zarr

from debias_workbench import load_variant
from debias_workbench.cli import main as workbench
from debias_workbench.core.errors import PipelineError
from debias_workbench.pipeline.export import class_folders, export
from debias_workbench.pipeline.fingerprint import read_fingerprint


def _arrays(store, split):
    group = zarr.open_group(str(store), mode="r")[split]
    return {name: group[name][:] for name, _ in group.arrays()}


@pytest.mark.parametrize("variant", ["original", "mixed_rand", "stylized"])
def test_load_variant_gives_every_row_of_a_split_with_its_image_labels_and_id(tiny_stores, variant):
    for split in ("train", "val"):
        data, stored = load_variant(tiny_stores[variant], split), _arrays(tiny_stores[variant], split)
        assert len(data) == len(stored["labels"]) > 0
        for i in range(len(data)):
            item = data[i]
            assert item["image"].dtype == torch.uint8 and item["image"].shape == (3, *stored["images"].shape[1:3])
            assert np.array_equal(item["image"].permute(1, 2, 0).numpy(), stored["images"][i])
            assert (item["label"], item["bias_label"], item["id"]) == (
                int(stored["labels"][i]), int(stored["bias_labels"][i]), str(stored["ids"][i]))
            assert ("mask" in item) == ("masks" in stored) and ("style_id" in item) == ("style_ids" in stored)
            if "masks" in stored:
                assert np.array_equal(item["mask"].numpy(), stored["masks"][i])
        assert data.classes == list(zarr.open_group(str(tiny_stores[variant]), mode="r").attrs["classes"])


def test_load_variant_as_pil_images_with_a_transform_and_in_dataloader_workers(tiny_stores):
    store = tiny_stores["original"]
    stored = _arrays(store, "train")
    pil = load_variant(store, "train", image_type="pil")
    assert pil[1]["image"].mode == "RGB" and np.array_equal(np.asarray(pil[1]["image"]), stored["images"][1])
    flipped = load_variant(store, "train", transform=lambda image: image.flip(-1))
    assert np.array_equal(flipped[0]["image"].permute(1, 2, 0).numpy(), stored["images"][0][:, ::-1])
    loader = torch.utils.data.DataLoader(load_variant(store, "train"), batch_size=5, num_workers=2)
    ids = [i for batch in loader for i in batch["id"]]
    assert ids == [str(i) for i in stored["ids"]]
    with pytest.raises(PipelineError, match="has no split 'test'"):
        load_variant(store, "test")
    with pytest.raises(ValueError, match="image_type 'numpy'"):
        load_variant(store, image_type="numpy")


def test_export_imagefolder_round_trips_through_torchvision(tiny_stores, tmp_path):
    from torchvision.datasets import ImageFolder

    store = tiny_stores["original"]
    assert workbench(["export", str(store), "--format", "imagefolder", "--out", str(tmp_path / "out")]) == 0
    classes = list(zarr.open_group(str(store), mode="r").attrs["classes"])
    for split in ("train", "val"):
        stored = _arrays(store, split)
        folder = ImageFolder(str(tmp_path / "out" / split))
        assert len(folder) == len(stored["labels"]) and folder.classes == class_folders(classes)
        with open(tmp_path / "out" / f"{split}.csv", newline="") as fh:
            rows = list(csv.DictReader(fh))
        by_file = {str(tmp_path / "out" / r["file"]): r for r in rows}
        assert len(rows) == len(folder)
        for path, target in folder.samples:  # ImageFolder's label is the store's label; the CSV has the rest
            row = by_file[path]
            k = [str(i) for i in stored["ids"]].index(row["id"])
            assert target == int(row["label"]) == int(stored["labels"][k])
            assert int(row["bias_label"]) == int(stored["bias_labels"][k])
            assert np.array_equal(np.asarray(folder.loader(path)), stored["images"][k])
        assert len(list((tmp_path / "out" / "masks" / split).rglob("*.png"))) == len(rows)  # the variant has masks
        assert sorted(p.name for p in (tmp_path / "out" / split).iterdir()) == class_folders(classes)  # each class


def test_export_webdataset_round_trips_through_the_webdataset_library(tiny_stores, tmp_path):
    wds = pytest.importorskip("webdataset", reason="the webdataset reader is in the `test` extra (pip install -e '.[test]')")
    store = tiny_stores["stylized"]
    export(store, "webdataset", tmp_path / "out")
    for split in ("train", "val"):
        stored = _arrays(store, split)
        shards = sorted(str(p) for p in (tmp_path / "out").glob(f"{split}-*.tar"))
        samples = list(wds.WebDataset(shards, shardshuffle=False, empty_check=False).decode("rgb8")
                       .to_tuple("png", "cls", "json"))
        assert len(samples) == len(stored["labels"])
        for k, (image, label, meta) in enumerate(samples):
            assert np.array_equal(image, stored["images"][k]) and label == int(stored["labels"][k])
            assert (meta["id"], meta["bias_label"], meta["style_id"]) == (
                str(stored["ids"][k]), int(stored["bias_labels"][k]), str(stored["style_ids"][k]))
    card = (tmp_path / "out" / "README.md").read_text()
    assert read_fingerprint(store)["digest"] in card and "ImageNet's terms of access" in card
    assert "## The config that made it" in card and "stylized:" in card and "path:\n    - train-000000.tar" in card


def test_hugging_face_datasets_loads_the_webdataset_export_by_its_card(tiny_stores, tmp_path, monkeypatch):
    """`load_dataset(DIR)`: the card's `configs` name each split's shards; same rows, pixels and labels."""
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    datasets = pytest.importorskip("datasets", reason="Hugging Face datasets is in the `test` extra (pip install -e '.[test]')")
    store = tiny_stores["original"]
    export(store, "webdataset", tmp_path / "out")
    loaded = datasets.load_dataset(str(tmp_path / "out"), cache_dir=str(tmp_path / "cache"))
    assert set(loaded) == {"train", "val"}
    for split in ("train", "val"):
        stored = _arrays(store, split)
        rows = sorted(loaded[split], key=lambda r: r["__key__"])
        assert len(rows) == len(stored["labels"])
        for k, row in enumerate(rows):
            assert np.array_equal(np.asarray(row["png"]), stored["images"][k]) and row["cls"] == int(stored["labels"][k])
            assert row["json"]["bias_label"] == int(stored["bias_labels"][k]) and row["json"]["id"] == str(stored["ids"][k])


def test_the_same_store_exports_to_the_same_bytes(tiny_stores, tmp_path):
    for name in ("a", "b"):
        export(tiny_stores["mixed_rand"], "webdataset", tmp_path / name)
    for shard in (tmp_path / "a").glob("*.tar"):
        assert shard.read_bytes() == (tmp_path / "b" / shard.name).read_bytes(), shard.name


def test_a_tampered_store_is_not_exported(tiny_stores, tmp_path, capsys):
    store = tmp_path / "original.zarr"
    shutil.copytree(tiny_stores["original"], store)
    chunk = sorted(p for p in (store / "train" / "images").rglob("*") if p.is_file() and p.name != "zarr.json")[0]
    data = bytearray(chunk.read_bytes())
    data[len(data) // 2] ^= 0xFF
    chunk.write_bytes(bytes(data))
    with pytest.raises(PipelineError, match=r"original.zarr differs from its fingerprint, so it is not exported"):
        export(store, "imagefolder", tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert workbench(["export", str(store), "--format", "webdataset", "--out", str(tmp_path / "out")]) == 1
    assert "array train/images: rows" in capsys.readouterr().err and not (tmp_path / "out").exists()
