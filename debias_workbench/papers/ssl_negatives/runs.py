"""The runs of Ge et al.'s Table 1: the self-supervised experiments of the config, in the table's order, and
the name a run goes by in the tables and figures."""

from __future__ import annotations

from typing import Any

from debias_workbench.training.methods import spec

#: the self-supervised methods of Ge et al.'s Table 1
SSL_METHODS = ("moco_v2", "moco_v2_texture", "byol")


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


def display(run: dict[str, Any]) -> str:
    """The run's label, with its alpha when it uses a negative and its label does not say it."""
    if run["negative"] == "none" or "α" in run["label"]:
        return run["label"]
    return f"{run['label']} (α = {run['alpha']:g})"
