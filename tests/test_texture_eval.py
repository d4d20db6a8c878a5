"""ReBias's texture-cluster accuracy: cell accuracies on hand-made predictions, Gram features,
clustering determinism, and the VGG encoder from the local weight file."""

import numpy as np
import pytest
import torch

from training.models import WeightsError
from training.texture_eval import cell_accuracy, early_vgg, gram_features, texture_clusters, unbiased_texture_accuracy

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
    assert torch.allclose(g[:, 0], full[:, 0, 0]) and torch.allclose(g[:, 1], full[:, 0, 1])
    rng = np.random.default_rng(0)
    feats = np.concatenate([rng.normal(m, 0.1, (30, 4)) for m in (0, 5, 10)])
    a, b = texture_clusters(feats, k=3, seeds=(0, 0))
    assert np.array_equal(a, b) and len(set(zip(a[::30], range(3)))) == 3 and len(np.unique(a)) == 3


def test_vgg_encoder_from_the_local_file(tmp_path):
    vgg = early_vgg(needs_shared("models/vgg_normalised.pth"))
    with torch.no_grad():
        out = vgg(torch.rand(2, 3, 32, 32))
    assert out.shape == (2, 128, 16, 16) and (out >= 0).all()
    with pytest.raises(WeightsError, match="nothing is downloaded"):
        early_vgg(tmp_path / "missing.pth")
    torch.save({"0.weight": torch.zeros(1)}, tmp_path / "other.pth")
    with pytest.raises(WeightsError, match="md5"):
        early_vgg(tmp_path / "other.pth")
