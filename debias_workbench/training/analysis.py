"""The CLAD paper's analyses of trained models (Sec. 4.4 and supplementary):

- Table 3: feature cosine similarity and decision consistency between ORIGINAL and MIXED_RAND
  versions of the same validation image (same foreground, other background).
- Table 6: accuracy drop on ORIGINAL when only a corner crop is seen (FiveCrop's four corners).
- Fig. 6: SmoothGrad saliency maps, and (ours) the share of saliency inside the foreground mask.

Each `*_rows` function returns tidy rows (kind "analysis") for the report.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torchvision.transforms.v2.functional as TF
import zarr

from debias_workbench.core.seeding import name_seed

from .build import pick_device
from .data import ZarrBatches, first_rows
from .evaluation import load_trained, run_tags
from .methods.base import Method


def feature_similarity(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity of each row pair of a, b (N, D) -> (N,)."""
    a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    return (a * b).sum(1)


def decision_consistency(pred_a: np.ndarray, pred_b: np.ndarray) -> float:
    """(1/N) sum_i 1(argmax g(x_i) = argmax g(x^_i)) from the two predicted classes (CLAD Sec. 4.4)."""
    return float(np.mean(np.asarray(pred_a) == np.asarray(pred_b)))


def corner_crops(x: torch.Tensor, fraction: float) -> list[torch.Tensor]:
    """The four corner crops (top-left, top-right, bottom-left, bottom-right) of FiveCrop, side
    `fraction` of the image side; FiveCrop's centre crop is left out (no foreground shift)."""
    side = max(1, round(x.shape[-1] * fraction))
    return list(TF.five_crop(x, [side, side])[:4])


def smoothgrad(
    logit_fn, x: torch.Tensor, target: torch.Tensor, samples: int, noise: float, generator: torch.Generator
) -> torch.Tensor:
    """SmoothGrad (Smilkov et al. 2017, Eq. 3): the gradient of the target class score averaged
    over `samples` copies of x with Gaussian noise of std noise * (max(x) - min(x)) per image;
    returned as |.| summed over channels, (B, H, W)."""
    span = (x.flatten(1).max(1).values - x.flatten(1).min(1).values).view(-1, 1, 1, 1)
    total = torch.zeros_like(x)
    for _ in range(samples):
        eps = torch.randn(x.shape, generator=generator).to(x.device)
        noisy = (x + noise * span * eps).requires_grad_(True)
        score = logit_fn(noisy).gather(1, target[:, None]).sum()
        total += torch.autograd.grad(score, noisy)[0]
    return (total / samples).abs().sum(1)


def foreground_share(saliency: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """Per image, the fraction of saliency mass on the foreground mask (B,) from (B, H, W)."""
    mass = saliency.reshape(len(saliency), -1).sum(1)
    inside = (saliency * (masks > 0)).reshape(len(saliency), -1).sum(1)
    return inside / np.maximum(mass, 1e-12)


def _batches(store: Path, split: str, batch_size: int, limit: int | None) -> Iterator[dict[str, torch.Tensor]]:
    """The images of `store`/`split` in order (the first `limit`: smoke mode's `evaluation.max_images`)."""
    batches = ZarrBatches(store, split, shuffle=False, fields=("images", "labels"), **first_rows(batch_size, limit))
    return batches.epoch(0)


def _check_same_images(a: Path, b: Path, split: str) -> None:
    ids_a = zarr.open_group(str(a), mode="r")[split]["ids"][:]
    ids_b = zarr.open_group(str(b), mode="r")[split]["ids"][:]
    if not np.array_equal(ids_a, ids_b):
        raise ValueError(
            f"{a} and {b} do not hold the same images in the same order ({split}); "
            "rebuild both variants from one segmented store"
        )


def _tags(state: dict[str, Any], analysis: str) -> dict[str, Any]:
    return {"kind": "analysis", "analysis": analysis, **run_tags(state["run_config"])}


def consistency_rows(model_paths: list[Path], config: dict[str, Any], stores: dict[str, Path]) -> list[dict]:
    """Table 3 for every model: mean feature similarity and decision consistency between the
    ORIGINAL and MIXED_RAND versions of each validation image."""
    split, bs, device = config["evaluation"]["split"], config["evaluation"]["batch_size"], pick_device()
    limit = config["evaluation"].get("max_images")
    _check_same_images(stores["original"], stores["mixed_rand"], split)
    rows = []
    for path in model_paths:
        method, state = load_trained(path, device)
        sims, preds_a, preds_b = [], [], []
        pairs = zip(_batches(stores["original"], split, bs, limit), _batches(stores["mixed_rand"], split, bs, limit))
        for ba, bb in pairs:
            xa, xb = (method.augmenter.normalize(b["images"].to(device)) for b in (ba, bb))
            sims.append(feature_similarity(method.features(xa).cpu().numpy(), method.features(xb).cpu().numpy()))
            preds_a.append(method.predict(xa).argmax(1).cpu().numpy())
            preds_b.append(method.predict(xb).argmax(1).cpu().numpy())
        tags = _tags(state, "consistency")
        n = int(sum(len(s) for s in sims))
        rows += [
            {**tags, "metric": "feature_similarity", "value": float(np.concatenate(sims).mean()), "n": n},
            {
                **tags,
                "metric": "decision_consistency",
                "value": decision_consistency(np.concatenate(preds_a), np.concatenate(preds_b)),
                "n": n,
            },
        ]
    return rows


def fivecrop_rows(model_paths: list[Path], config: dict[str, Any], stores: dict[str, Path]) -> list[dict]:
    """Table 6 for every model: accuracy (%) on whole ORIGINAL images, on each corner crop, and
    the drop = whole - mean over the four corners."""
    split, bs, device = config["evaluation"]["split"], config["evaluation"]["batch_size"], pick_device()
    limit = config["evaluation"].get("max_images")
    fraction = config["fivecrop_fraction"]
    names = ["top_left", "top_right", "bottom_left", "bottom_right"]
    rows = []
    for path in model_paths:
        method, state = load_trained(path, device)
        correct = {k: 0 for k in ["whole", *names]}
        n = 0
        for batch in _batches(stores["original"], split, bs, limit):
            x, y = method.augmenter.normalize(batch["images"].to(device)), batch["labels"].to(device)
            correct["whole"] += int((method.predict(x).argmax(1) == y).sum())
            for name, crop in zip(names, corner_crops(x, fraction)):
                correct[name] += int((method.predict(crop).argmax(1) == y).sum())
            n += len(y)
        acc = {k: 100.0 * v / n for k, v in correct.items()}
        tags = _tags(state, "fivecrop")
        rows += [{**tags, "metric": f"accuracy_{k}", "value": v, "n": n} for k, v in acc.items()]
        rows.append(
            {**tags, "metric": "accuracy_drop", "value": acc["whole"] - float(np.mean([acc[k] for k in names])), "n": n}
        )
    return rows


def saliency_outputs(
    model_paths: list[Path], config: dict[str, Any], stores: dict[str, Path]
) -> tuple[list[dict], dict[str, np.ndarray]]:
    """Fig. 6: SmoothGrad maps of the same ORIGINAL validation images (for the true class) for
    every model. Rows: per model, the mean share of saliency inside the foreground mask (and the
    masks' mean area, the share a map blind to the object would get). Arrays for the figure:
    images, masks, labels and `map/<experiment>` of the first seed of each experiment."""
    cfg, split, device = config["saliency"], config["evaluation"]["split"], pick_device()
    group = zarr.open_group(str(stores["original"]), mode="r")[split]
    if "masks" not in group:
        raise ValueError(f"{stores['original']}/{split} has no masks; rebuild the original variant")
    n_total = group["labels"].shape[0]
    idx = np.unique(np.linspace(0, n_total - 1, min(cfg["images"], n_total)).astype(int))
    images = np.stack([group["images"][i] for i in idx])
    masks = np.stack([group["masks"][i] for i in idx])
    labels = group["labels"][:][idx]
    arrays: dict[str, np.ndarray] = {
        "images": images[: cfg["figure_images"]],
        "masks": masks[: cfg["figure_images"]],
        "labels": labels[: cfg["figure_images"]],
    }
    rows = []
    for path in model_paths:
        method, state = load_trained(path, device)
        x = method.augmenter.normalize(torch.from_numpy(images).to(device))
        gen = torch.Generator().manual_seed(
            name_seed("smoothgrad", *(state["run_config"][k] for k in ("experiment", "seed")))
        )
        sal = _smoothgrad_of(method, x, torch.from_numpy(labels).to(device), cfg, gen)
        share = foreground_share(sal, masks)
        tags = _tags(state, "saliency")
        rows += [
            {**tags, "metric": "saliency_in_foreground", "value": float(share.mean()), "n": len(idx)},
            {**tags, "metric": "foreground_area", "value": float((masks > 0).mean()), "n": len(idx)},
        ]
        if f"map/{state['run_config']['experiment']}" not in arrays:
            arrays[f"map/{state['run_config']['experiment']}"] = sal[: cfg["figure_images"]]
    return rows, arrays


def _smoothgrad_of(
    method: Method, x: torch.Tensor, y: torch.Tensor, cfg: dict[str, Any], generator: torch.Generator
) -> np.ndarray:
    with torch.enable_grad():
        return (
            smoothgrad(lambda inp: method.network(inp).float(), x, y, cfg["samples"], cfg["noise"], generator)
            .cpu()
            .numpy()
        )
