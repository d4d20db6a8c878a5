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

from pipeline.store import file_digest

from .build import pick_device
from .data import ZarrBatches
from .evaluation import load_trained, predict_store, run_tags
from .models import WeightsError

VGG_NORMALISED_MD5 = "bb6e9a222ef3630ff734596f29ad8d20"
#: (in, out) channels of the normalised VGG-19's convolutions up to relu2_1, in order
_EARLY_CONVS = ((64, 64), (64, 128))


def early_vgg(weights: str | Path, md5: str | None = VGG_NORMALISED_MD5) -> nn.Sequential:
    """The normalised VGG-19 (AdaIN's encoder layout: a 1x1 colour conv, then reflection-padded
    3x3 convs) up to relu2_1, with weights from `weights` (its module indices are the keys)."""
    path = Path(weights).expanduser()
    if not path.is_file():
        raise WeightsError(f"VGG weights not found at {path}. Place vgg_normalised.pth (80,102,481 bytes, md5 "
                           f"{VGG_NORMALISED_MD5}) there; nothing is downloaded at run time.")
    if md5 and (actual := file_digest(path, "md5")) != md5:
        raise WeightsError(f"{path} has md5 {actual}, expected {md5}; replace it with an intact copy")
    layers: list[nn.Module] = [nn.Conv2d(3, 3, 1), nn.ReflectionPad2d(1), nn.Conv2d(3, 64, 3), nn.ReLU()]
    layers += [nn.ReflectionPad2d(1), nn.Conv2d(*_EARLY_CONVS[0], 3), nn.ReLU(), nn.MaxPool2d(2, 2, ceil_mode=True)]
    layers += [nn.ReflectionPad2d(1), nn.Conv2d(*_EARLY_CONVS[1], 3), nn.ReLU()]
    net = nn.Sequential(*layers)
    state = torch.load(path, map_location="cpu", weights_only=True)
    wanted = {k: v for k, v in state.items() if int(k.split(".")[0]) < len(layers)}
    missing, _ = net.load_state_dict(wanted, strict=False)
    if missing:
        raise WeightsError(f"{path} is not the normalised VGG-19 (missing {missing[:4]})")
    return net.eval()


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
    feats, labels = store_texture_features(early_vgg(cfg["vgg"], cfg.get("vgg_md5", VGG_NORMALISED_MD5)),
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
