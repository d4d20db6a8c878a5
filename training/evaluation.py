"""Accuracy on every variant of the Background Challenge, for our models and for a
1000-class ImageNet model scored through the IN-1k -> IN-9 mapping (Base (IN))."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from pipeline.sources.imagenet import load_in1k_to_in9

from .data import Augmenter, ZarrBatches
from .methods import Method
from .trainer import build_method, pick_device

#: sub-class counts per IN-9 label in the Background Challenge's in_to_in9.json
IN9_SUBCLASS_COUNTS = (116, 52, 42, 36, 35, 27, 26, 20, 16)


def predict_store(predict: Callable[[torch.Tensor], torch.Tensor], store: Path, split: str, batch_size: int,
                  augmenter: Augmenter, device: torch.device) -> tuple[np.ndarray, np.ndarray]:
    """(predicted class, label) for every image of `store`/`split`, in store order."""
    batches = ZarrBatches(store, split, batch_size, shuffle=False, fields=("images", "labels"), prefetch=2)
    preds, labels = [], []
    for batch in batches.epoch(0):
        x = augmenter.normalize(batch["images"].to(device))
        preds.append(predict(x).cpu().numpy())
        labels.append(batch["labels"].numpy())
    return np.concatenate(preds), np.concatenate(labels)


def accuracy_rows(predict: Callable[[torch.Tensor], torch.Tensor], stores: dict[str, Path], split: str,
                  batch_size: int, augmenter: Augmenter, device: torch.device, tags: dict[str, Any]) -> list[dict]:
    """One tidy row per variant: accuracy (%) and the number of images; plus the BG-GAP
    row, acc(MIXED_SAME) - acc(MIXED_RAND), when both variants are evaluated."""
    rows, acc = [], {}
    for variant, store in stores.items():
        pred, label = predict_store(predict, store, split, batch_size, augmenter, device)
        acc[variant] = float(100.0 * (pred == label).mean())
        rows.append({"kind": "eval", **tags, "variant": variant, "split": split, "metric": "accuracy",
                     "value": acc[variant], "n": int(label.size)})
    if "mixed_same" in acc and "mixed_rand" in acc:
        rows.append({"kind": "eval", **tags, "variant": "mixed_same-mixed_rand", "split": split, "metric": "bg_gap",
                     "value": acc["mixed_same"] - acc["mixed_rand"], "n": None})
    return rows


def load_trained(model_path: Path, config: dict[str, Any], device: torch.device) -> tuple[Method, dict[str, Any]]:
    """The trained method in eval mode, and the saved record (experiment, seed, classes)."""
    state = torch.load(model_path, map_location=device, weights_only=False)
    method = build_method(config, state["experiment"], state["seed"], len(state["classes"]), device)
    method.load_state_dict(state.pop("state_dict"))
    return method.eval(), state


def evaluate_run(model_path: Path, config: dict[str, Any], stores: dict[str, Path]) -> list[dict]:
    device = pick_device()
    method, state = load_trained(model_path, config, device)
    exp = config["experiments"][state["experiment"]]
    tags = {"experiment": state["experiment"], "label": exp["label"], "method": exp["method"], "seed": state["seed"],
            "dataset": config["evaluation"]["dataset"]}
    ev = config["evaluation"]
    return accuracy_rows(lambda x: method.predict(x).argmax(1), stores, ev["split"], ev["batch_size"],
                         method.augmenter, device, tags)


def mapping_tensor(mapping_path: Path) -> torch.Tensor:
    """(1000,) IN-9 label of every IN-1k class (-1 for unmapped), verified against the
    Background Challenge's published sub-class counts."""
    mapping = load_in1k_to_in9(mapping_path)
    table = torch.tensor([mapping[i] for i in range(1000)])
    counts = tuple(int((table == k).sum()) for k in range(9))
    if counts != IN9_SUBCLASS_COUNTS:
        raise ValueError(f"{mapping_path} maps {counts} IN-1k classes per IN-9 label, expected {IN9_SUBCLASS_COUNTS}; "
                         "use the in_to_in9.json of the Background Challenge release")
    return table


def in1k_to_in9(logits: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """IN-9 prediction of a 1000-class model: its top-1 class mapped; -1 (never correct) if unmapped."""
    return table.to(logits.device)[logits.argmax(1)]


def evaluate_imagenet_model(config: dict[str, Any], stores: dict[str, Path]) -> list[dict]:
    """Base (IN): a 1000-class ImageNet model scored on IN-9 through the mapping."""
    from .models import imagenet_classifier

    spec = config["evaluation"]["imagenet_model"]
    device = pick_device()
    net = imagenet_classifier(spec["arch"], spec["weights"], spec.get("sha256")).to(device).eval()
    table = mapping_tensor(Path(spec["mapping"]).expanduser())
    # ImageNet models expect ImageNet statistics, not the IN-9 ones.
    augmenter = Augmenter([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
    ev = config["evaluation"]
    tags = {"experiment": "base_in", "label": "Base (IN)", "method": "imagenet", "seed": 0, "dataset": ev["dataset"]}
    with torch.no_grad():
        return accuracy_rows(lambda x: in1k_to_in9(net(x), table), stores, ev["split"], ev["batch_size"],
                             augmenter, device, tags)
