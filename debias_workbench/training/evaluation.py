"""Accuracy on every variant of the Background Challenge, for our models and for a
1000-class ImageNet model scored through the IN-1k -> IN-9 mapping (Base (IN))."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, NotRequired, TypedDict

import numpy as np
import torch

from debias_workbench.core.names import IMAGENET_EXPERIMENT
from debias_workbench.core.seeding import name_seed
from debias_workbench.core.statistics import group_bootstrap_se, pack_hits, proportion_se
from debias_workbench.pipeline.sources.imagenet import load_in1k_to_in9
from debias_workbench.training.run_config import EvaluationConfig, RunConfig

from .augment import Augmenter
from .build import build_method, pick_device
from .data import ZarrBatches, first_rows
from .methods.base import Method

#: variants whose val images are cue-conflict images (shape of the label's class, texture of the
#: bias label's class): their rows include the shape bias
CUE_CONFLICT_VARIANTS = ("stylized",)
#: variants whose images carry a corruption severity (IN-9-C): their rows include the accuracy per severity
CORRUPTED_VARIANTS = ("corrupted",)
#: input side of the ImageNet models scored as Base (IN)
IMAGENET_INPUT = 224
#: sub-class counts per IN-9 label in the Background Challenge's in_to_in9.json
IN9_SUBCLASS_COUNTS = (116, 52, 42, 36, 35, 27, 26, 20, 16)


def scoring_batches(
    store: Path, split: str, batch_size: int, device: torch.device, limit: int | None = None
) -> ZarrBatches:
    """The in-order batches `predict_store` scores (pinned for a GPU); a caller scoring one split
    again and again (the learning-curve monitor) keeps them, and the split is read once."""
    return ZarrBatches(
        store,
        split,
        shuffle=False,
        fields=("images", "labels", "bias_labels"),
        prefetch=2,
        pin_memory=device.type == "cuda",
        **first_rows(batch_size, limit),
    )


def predict_store(
    predict: Callable[[torch.Tensor], torch.Tensor],
    store: Path,
    split: str,
    batch_size: int,
    augmenter: Augmenter,
    device: torch.device,
    limit: int | None = None,
    batches: ZarrBatches | None = None,
) -> dict[str, np.ndarray]:
    """{"pred", "labels", "bias_labels"} for every image of `store`/`split` (the first `limit`, if
    given: smoke mode's `evaluation.max_images`), in store order; `batches` (`scoring_batches`)
    when the caller keeps them. Predictions stay on the device until the last batch (one read)."""
    batches = batches or scoring_batches(store, split, batch_size, device, limit)
    preds: list[torch.Tensor] = []
    out: dict[str, list[np.ndarray]] = {"labels": [], "bias_labels": []}
    for batch in batches.epoch(0):
        preds.append(predict(augmenter.normalize(batch["images"].to(device, non_blocking=True))))
        for field in ("labels", "bias_labels"):
            out[field].append(batch[field].numpy())
    # an empty split (a smoke run's one image per class can leave Mixed-Same without a partner) scores NaN
    return {
        "pred": torch.cat(preds).cpu().numpy() if preds else np.empty(0, np.int64),
        **{k: np.concatenate(v) if v else np.empty(0, np.int64) for k, v in out.items()},
    }


def accuracy(result: dict[str, np.ndarray]) -> float:
    """Accuracy (%) of a `predict_store` result; NaN without images."""
    return scored_accuracy(result)["value"]


class Share(TypedDict):
    """A scored accuracy: % of images right, their number, its standard error, which were (`pack_hits`)."""

    value: float
    n: int
    se: float
    hits: NotRequired[str]


def scored_accuracy(result: dict[str, np.ndarray]) -> Share:
    """`scored_share` of a `predict_store` result's correct predictions: accuracy (%), images, `se`."""
    return scored_share(result["pred"] == result["labels"])


def shape_bias(result: dict[str, np.ndarray]) -> tuple[float, int]:
    """Geirhos et al. (2019): over cue-conflict images (shape of class A = label, texture of class
    B = bias label, B != A), counting only the decisions for A or B, shape bias = #A / (#A + #B) (%).
    Returns (shape bias, number of counted decisions); NaN when there are none."""
    conflict = (result["bias_labels"] >= 0) & (result["bias_labels"] != result["labels"])
    shape = int((result["pred"][conflict] == result["labels"][conflict]).sum())
    texture = int((result["pred"][conflict] == result["bias_labels"][conflict]).sum())
    return (100.0 * shape / (shape + texture) if shape + texture else float("nan")), shape + texture


def severity_rows(result: dict[str, np.ndarray], store: Path, split: str, tags: dict[str, Any]) -> list[dict]:
    """Accuracy (%) per corruption severity of an IN-9-C store (mean over the corruptions, which are
    balanced within each severity), as ImageNet-C's accuracy-vs-severity curves."""
    import zarr

    correct = result["pred"] == result["labels"]
    severity = zarr.open_group(store, mode="r")[split]["severity"][: len(correct)]  # the rows scored
    return [
        {**tags, "metric": "severity_accuracy", "severity": int(s), **scored_share(correct[severity == s])}
        for s in np.unique(severity)
    ]


def scored_share(hits: np.ndarray) -> Share:
    """{"value": % of `hits` that are true, "n": their number, "se": its test-image bootstrap
    standard error (`core.statistics.proportion_se`), "hits": which were (`pack_hits`: the report
    pairs two models image by image)}; NaN without any."""
    value = float(100.0 * hits.mean()) if hits.size else float("nan")
    return {"value": value, "n": int(hits.size), "se": proportion_se(value, hits.size), "hits": pack_hits(hits)}


def group_metrics(result: dict[str, np.ndarray], tags: dict[str, Any], test_set: str) -> dict[str, Share]:
    """{metric: {"value", "n", "se"}} of the accuracies (%) that do not let the majority groups hide
    the others: on the bias-conflicting images (bias label != label; LfF's "unbiased" samples,
    BFFHQ's reported set; NaN if none), the mean over classes (Waterbirds' average of per-class
    accuracies) and the worst (label, bias label) group (group DRO's worst-group accuracy; `n` is
    the size of that group). `se`: a bootstrap over the test images, stratified by class or group
    (`core.statistics.group_bootstrap_se`, seeded by the run's `tags` and the `test_set`'s name)."""
    seed = name_seed("bootstrap", *sorted(map(str, tags.values())), test_set)
    correct = result["pred"] == result["labels"]
    labels, bias = result["labels"], result["bias_labels"]
    groups = labels.astype(np.int64) * (int(bias.max(initial=0)) + 2) + (bias.astype(np.int64) + 1)  # (label, bias) ids
    ids = np.unique(groups)
    accs = [correct[groups == g].mean() for g in ids]
    worst = ids[int(np.argmin(accs))]
    return {
        "conflicting_accuracy": scored_share(correct[bias != labels]),
        "mean_class_accuracy": {
            "value": float(100.0 * np.mean([correct[labels == c].mean() for c in np.unique(labels)])),
            "n": int(labels.size),
            "se": group_bootstrap_se(correct, labels, "mean", seed),
        },
        "worst_group_accuracy": {
            "value": float(100.0 * min(accs)),
            "n": int((groups == worst).sum()),
            "se": group_bootstrap_se(correct, groups, "min", seed + 1),
        },
    }


def cell_accuracy_rows(result: dict[str, np.ndarray], tags: dict[str, Any]) -> list[dict]:
    """Accuracy (%) per (bias label, class) cell with at least one image (ReBias Fig. 3)."""
    rows = []
    for b, y in sorted(set(zip(result["bias_labels"].tolist(), result["labels"].tolist()))):
        cell = (result["bias_labels"] == b) & (result["labels"] == y)
        rows.append(
            {
                **tags,
                "metric": "cell_accuracy",
                "bias_label": b,
                "class_label": y,
                **scored_share(result["pred"][cell] == y),
            }
        )
    return rows


def accuracy_rows(
    predict: Callable[[torch.Tensor], torch.Tensor],
    stores: dict[str, Path],
    split: str,
    batch_size: int,
    augmenter: Augmenter,
    device: torch.device,
    tags: dict[str, Any],
    cells: bool = False,
    limit: int | None = None,
) -> list[dict]:
    """One tidy row per variant: accuracy (%), the number of images and its test-image standard
    error `se` (and with `cells`, the accuracy of every bias x class cell and the `group_metrics`;
    on cue-conflict variants, the shape bias; on corrupted ones, the accuracy per severity). BG-GAP
    is not a row: the report computes it from the two accuracies, image by image
    (`report.context.accuracy_table`)."""
    rows = []
    for variant, store in stores.items():
        result = predict_store(predict, store, split, batch_size, augmenter, device, limit)
        row_tags = {"kind": "eval", **tags, "variant": variant, "split": split}
        rows.append({**row_tags, "metric": "accuracy", **scored_accuracy(result)})
        if variant in CUE_CONFLICT_VARIANTS:
            bias, decisions = shape_bias(result)
            rows.append(
                {
                    **row_tags,
                    "metric": "shape_bias",
                    "value": bias,
                    "n": decisions,
                    "se": proportion_se(bias, decisions),
                }
            )
        if variant in CORRUPTED_VARIANTS:
            rows += severity_rows(result, store, split, row_tags)
        if cells:
            rows += cell_accuracy_rows(result, row_tags)
            rows += [{**row_tags, "metric": k, **v} for k, v in group_metrics(result, tags, variant).items()]
    return rows


def load_trained(model_path: Path, device: torch.device) -> tuple[Method, dict[str, Any]]:
    """The trained method in eval mode, and the saved record (`run_config`, `classes`)."""
    state = torch.load(model_path, map_location=device, weights_only=False)
    method = build_method(state["run_config"], len(state["classes"]), device, scoring=True)
    method.load_state_dict(state.pop("state_dict"))
    return method.eval(), state


def run_tags(run_cfg: RunConfig) -> dict[str, Any]:
    """The columns that identify a run's rows: experiment, method, seed, and the tags its
    declaration gives (a grid's: grid, method key, train variant). Labels are the report's business."""
    return {
        "experiment": run_cfg["experiment"],
        "method": run_cfg["method"],
        "seed": run_cfg["seed"],
        **run_cfg.get("tags", {}),
    }


def evaluate_run(model_path: Path, eval_cfg: EvaluationConfig, stores: dict[str, Path]) -> list[dict]:
    """Accuracy of a trained run on its test sets `stores` (`eval_cfg`, `workflow.slices.scoring_config`:
    split, batch size, the dataset the rows are tagged with, and whether its family asks for the
    group metrics: per-cell, bias-conflicting, mean-class and worst-group accuracy)."""
    device = pick_device()
    method, state = load_trained(model_path, device)
    return score_run(method, state, eval_cfg, stores, device)


def score_run(
    method: Method, state: dict[str, Any], eval_cfg: EvaluationConfig, stores: dict[str, Path], device: torch.device
) -> list[dict]:
    """`evaluate_run` of a run already loaded (`load_trained`): one load for several sets of test sets."""
    tags = {**run_tags(state["run_config"]), "dataset": eval_cfg["dataset"]}
    rows = accuracy_rows(
        lambda x: method.predict(x).argmax(1),
        stores,
        eval_cfg["split"],
        eval_cfg["batch_size"],
        method.augmenter,
        device,
        tags,
        cells=eval_cfg.get("group_metrics", False),
        limit=eval_cfg.get("max_images"),
    )
    if method.scores_similarity and "original" in stores:  # self-supervised runs: Ge et al. Figs. 2-3
        from .methods.ssl_eval import similarity_rows

        rows += similarity_rows(
            method, stores, eval_cfg["split"], eval_cfg["batch_size"], device, tags, eval_cfg.get("max_images")
        )
    return rows


def mapping_tensor(mapping_path: Path) -> torch.Tensor:
    """(1000,) IN-9 label of every IN-1k class (-1 for unmapped), verified against the
    Background Challenge's published sub-class counts."""
    mapping = load_in1k_to_in9(mapping_path)
    table = torch.tensor([mapping[i] for i in range(1000)])
    counts = tuple(int((table == k).sum()) for k in range(9))
    if counts != IN9_SUBCLASS_COUNTS:
        raise ValueError(
            f"{mapping_path} maps {counts} IN-1k classes per IN-9 label, expected {IN9_SUBCLASS_COUNTS}; "
            "use the in_to_in9.json of the Background Challenge release"
        )
    return table


def in1k_to_in9(logits: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """IN-9 prediction of a 1000-class model: its top-1 class mapped; -1 (never correct) if unmapped."""
    return table.to(logits.device)[logits.argmax(1)]


def evaluate_imagenet_model(ev: EvaluationConfig, stores: dict[str, Path]) -> list[dict]:
    """Base (IN): a 1000-class ImageNet model (`ev["imagenet_model"]`) scored on IN-9 through the
    mapping, each image resized to the model's 224-px input (bilinear) and normalised as the
    model was trained."""
    from .models import IMAGENET_NORMALIZE, TORCHVISION_NORMALIZE, imagenet_classifier

    spec = ev["imagenet_model"]
    device = pick_device()
    net = imagenet_classifier(spec["arch"], spec.get("weights"), spec.get("sha256")).to(device).eval()
    table = mapping_tensor(Path(spec["mapping"]).expanduser())
    augmenter = Augmenter(*IMAGENET_NORMALIZE.get(spec["arch"], TORCHVISION_NORMALIZE))
    tags = {"experiment": IMAGENET_EXPERIMENT, "method": "imagenet", "seed": 0, "dataset": ev["dataset"]}

    def predict(x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != IMAGENET_INPUT:
            x = torch.nn.functional.interpolate(
                x, size=(IMAGENET_INPUT, IMAGENET_INPUT), mode="bilinear", align_corners=False, antialias=True
            )
        return in1k_to_in9(net(x), table)

    with torch.no_grad():
        return accuracy_rows(
            predict, stores, ev["split"], ev["batch_size"], augmenter, device, tags, limit=ev.get("max_images")
        )
