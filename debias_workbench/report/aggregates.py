"""The report's shared aggregations: tidy rows or the config in, tables keyed by model, grid cell or
run out. Below the sections (`report.sections.*`) and the context (`report.context`), which both
read them; nothing here writes to the document."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from debias_workbench.core.statistics import run_value
from debias_workbench.training.methods import spec

from .helpers import counted_values, too_few_column

#: the self-supervised methods of Ge et al.'s Table 1
SSL_METHODS = ("moco_v2", "moco_v2_texture", "byol")
#: the column of shape-bias decision counts of the seeds that counted too few to give a value
SHAPE_BIAS_TOO_FEW = too_few_column("shape_bias")


def shape_bias_table(rows: list[dict[str, Any]], labels: dict[str, str]) -> dict[str, dict[str, list[float]]]:
    """{model label: {"shape_bias": [shape bias per seed], SHAPE_BIAS_TOO_FEW: [decisions per seed]}}
    from the eval rows (`labels`: experiment -> label): a seed whose shape bias counts fewer than
    `MIN_IMAGES` decisions (Geirhos et al.: only the images classified as the shape or the texture
    class count) gives its count, not its value (`helpers.counted_values`)."""
    return counted_values(rows, "shape_bias", labels)


def grid_accuracies(rows: list[dict[str, Any]], grid: str) -> dict[tuple[str, str, str], list[float]]:
    """{(train variant, method key, test set): [accuracy per seed]} of a grid's eval rows."""
    out: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for r in sorted((r for r in rows if r.get("grid") == grid and r["metric"] == "accuracy"), key=lambda r: r["seed"]):
        out[(r["train_variant"], r["grid_method"], r["variant"])].append(run_value(r))
    return out


def ssl_runs(config: dict[str, Any]) -> list[dict[str, Any]]:
    """The self-supervised experiments in Table 1's order: MoCo-v2, + texture, + patch (by alpha),
    BYOL, BYOL + patch; each {experiment, label, method, negative, alpha}."""
    runs = []
    for name, exp in config["experiments"].items():
        if exp["method"] in SSL_METHODS and not exp.get("grid"):
            args = {**spec(exp["method"]).defaults, **exp.get("method_args", {})}
            runs.append(
                {
                    "experiment": name,
                    "label": exp["label"],
                    "method": exp["method"],
                    "negative": args["negative"],
                    "alpha": float(args["alpha"]),
                    "probe_lr": float(args["probe_lr"]),
                    "probe_augment": bool(args["probe_augment"]),
                }
            )
    order = {
        ("moco_v2", "none"): 0,
        ("moco_v2_texture", "texture"): 1,
        ("moco_v2", "patch"): 2,
        ("byol", "none"): 3,
        ("byol", "patch"): 4,
    }
    return sorted(runs, key=lambda r: (order[(r["method"], r["negative"])], r["alpha"]))
