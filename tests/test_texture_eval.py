"""ReBias's texture-cluster accuracy: cell accuracies on hand-made predictions, Gram features,
L2-normalised rows into MiniBatchKMeans, and the conv3_3 extractors (torchvision's VGG16 layout,
the normalised VGG-19 stand-in from the local weight file)."""

import numpy as np
import pytest
import sklearn.cluster
import torch
import torchvision

from debias_workbench.training.weights import WeightsError
from debias_workbench.training.texture_eval import (IMAGENET_MEAN, IMAGENET_STD, cell_accuracy, gram_features, texture_clusters,
                                   texture_network, unbiased_texture_accuracy, vgg16_conv3_3,
                                   vgg16_features_to_conv3_3, vgg19_conv3_3)

from .conftest import needs_shared


def test_cell_accuracy_averages_cells_with_more_than_ten_samples():
    # cluster 0 / class 0: 20 samples, 15 right; cluster 1 / class 0: 12 samples, 3 right;
    # cluster 1 / class 1: 10 samples (too few: left out), all right
    clusters = np.array([0] * 20 + [1] * 12 + [1] * 10)
    labels = np.array([0] * 32 + [1] * 10)
    pred = np.array([0] * 15 + [1] * 5 + [0] * 3 + [1] * 9 + [1] * 10)
    assert cell_accuracy(pred, labels, clusters) == pytest.approx(100 * (15 / 20 + 3 / 12) / 2)
    assert unbiased_texture_accuracy(pred, labels, [clusters, np.zeros(42, int)]) == pytest.approx(
        (100 * (15 / 20 + 3 / 12) / 2 + 100 * 18 / 32) / 2)  # one cluster: class 1's 10 samples left out
    with pytest.raises(ValueError, match="more than 10"):
        cell_accuracy(pred[:5], labels[:5], clusters[:5])


def test_gram_features_and_clusters():
    x = torch.randn(4, 3, 5, 5)
    g = gram_features(x)
    assert g.shape == (4, 6)
    full = torch.einsum("bchw,bdhw->bcd", x, x) / 25
    assert torch.allclose(g[:, 0], full[:, 0, 0]) and torch.allclose(g[:, 1], 2 ** 0.5 * full[:, 0, 1])
    # the upper triangle keeps the geometry of the whole flattened Gram matrix (the authors' feature)
    assert torch.allclose(g.norm(dim=1), full.flatten(1).norm(dim=1))
    assert torch.allclose(torch.cdist(g, g), torch.cdist(full.flatten(1), full.flatten(1)), atol=1e-4)
    rng = np.random.default_rng(0)
    directions = np.eye(4)[:3]
    feats = np.concatenate([rng.uniform(0.1, 100, (30, 1)) * (d + rng.normal(0, 0.01, (30, 4))) for d in directions])
    a, b = texture_clusters(feats, k=3, seeds=(0, 0))
    assert np.array_equal(a, b) and len(set(zip(a[::30], range(3)))) == 3 and len(np.unique(a)) == 3
    assert all(len(np.unique(a[i:i + 30])) == 1 for i in (0, 30, 60))  # grouped by direction, whatever the scale


def test_kmeans_sees_l2_normalised_rows_in_batches_of_1024(monkeypatch):
    """make_clusters.py divides each image's Gram row by its L2 norm before MiniBatchKMeans
    (batch 1024); z-scored columns (the former input) have no unit rows."""
    seen = []

    class Recording(sklearn.cluster.MiniBatchKMeans):
        def fit_predict(self, X, *args, **kwargs):
            seen.append((np.array(X), self.batch_size, self.n_clusters))
            return super().fit_predict(X, *args, **kwargs)

    monkeypatch.setattr(sklearn.cluster, "MiniBatchKMeans", Recording)
    feats = np.random.default_rng(1).uniform(0, 50, (40, 6))
    texture_clusters(feats, k=4, seeds=(0, 1))
    assert len(seen) == 2
    for rows, batch, k in seen:
        assert batch == 1024 and k == 4
        assert np.allclose(np.linalg.norm(rows, axis=1), 1.0)
        assert np.allclose(rows, feats / np.linalg.norm(feats, axis=1, keepdims=True))


def _fake_torchvision_vgg16(path, features: torch.nn.Sequential) -> None:
    """A file shaped like torchvision's vgg16-397923af.pth: the entries of the first 15 modules of
    `features` as `features.*`, and a classifier entry the extractor must ignore."""
    state = {f"features.{k}": v for k, v in features.state_dict().items() if int(k.split(".")[0]) < 15}
    torch.save({**state, "classifier.6.bias": torch.zeros(1000)}, path)


def test_vgg16_extractor_is_torchvisions_features_up_to_conv3_3(tmp_path):
    """ReBias's `features[:-16]`: 15 modules of torchvision's VGG16, the last one conv3_3 (256
    channels, 1/4 of the input's side, no ReLU after it), fed ImageNet-normalised images."""
    features = torchvision.models.vgg16(weights=None).features
    reference = features[:-16].eval()
    assert len(reference) == 15 and isinstance(reference[-1], torch.nn.Conv2d)
    _fake_torchvision_vgg16(tmp_path / "vgg16.pth", features)
    net = vgg16_conv3_3(tmp_path / "vgg16.pth", sha256=None)
    layers = net[1]
    assert [type(m) for m in layers] == [type(m) for m in reference]
    assert [(m.in_channels, m.out_channels, m.padding) for m in layers if isinstance(m, torch.nn.Conv2d)] == \
        [(m.in_channels, m.out_channels, m.padding) for m in reference if isinstance(m, torch.nn.Conv2d)]
    x = torch.rand(2, 3, 32, 32)
    with torch.no_grad():
        out = net(x)
        mean, std = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1), torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
        expected = reference((x - mean) / std)
    assert out.shape == (2, 256, 8, 8) and (out < 0).any()
    assert torch.allclose(out, expected, atol=1e-5)
    assert texture_network({"vgg16": tmp_path / "vgg16.pth", "vgg16_sha256": None, "vgg": None})[1][0].weight.equal(
        layers[0].weight)


def test_vgg16_weights_are_checked_never_downloaded(tmp_path):
    with pytest.raises(WeightsError, match="nothing is downloaded"):
        vgg16_conv3_3(tmp_path / "missing.pth")
    _fake_torchvision_vgg16(tmp_path / "vgg16.pth", vgg16_features_to_conv3_3())
    with pytest.raises(WeightsError, match="starting with 397923af"):  # the default: torchvision's file
        vgg16_conv3_3(tmp_path / "vgg16.pth")
    torch.save({"features.0.weight": torch.zeros(1)}, tmp_path / "other.pth")
    with pytest.raises(WeightsError, match="not torchvision's VGG16"):
        vgg16_conv3_3(tmp_path / "other.pth", sha256=None)


def test_vgg19_stand_in_ends_at_conv3_3_from_the_local_file(tmp_path):
    weights = needs_shared("models/vgg_normalised.pth")
    vgg = vgg19_conv3_3(weights)
    assert isinstance(vgg[-1], torch.nn.Conv2d) and vgg[-1].out_channels == 256
    with torch.no_grad():
        out = vgg(torch.rand(2, 3, 32, 32))
    assert out.shape == (2, 256, 8, 8) and (out < 0).any()  # conv3_3 before its ReLU
    assert texture_network({"vgg": weights, "vgg16": None})[-1].weight.equal(vgg[-1].weight)
    with pytest.raises(WeightsError, match="nothing is downloaded"):
        vgg19_conv3_3(tmp_path / "missing.pth")
    torch.save({"0.weight": torch.zeros(1)}, tmp_path / "other.pth")
    with pytest.raises(WeightsError, match="md5"):
        vgg19_conv3_3(tmp_path / "other.pth")
