"""The report job's config slice (`slices` for the other jobs'): the report's keys, the experiments' display
names, the grids whole, the protocols' tables and the config's provenance.

Apart from `slices` because it reads the protocols (`workflow.protocol`), which read `slices.run_config`:
the one direction keeps the two modules out of an import circle.
"""

from __future__ import annotations

from typing import Any

from .protocol import report_protocols
from .slices import results_only

#: what the report needs of each experiment (labels are for display only; method_args place the
#: self-supervised runs in Ge et al.'s Table 1 by their negative and alpha)
REPORT_EXPERIMENT_KEYS = ("label", "method", "method_args", "dataset", "train_variant", "seeds", "grid", "grid_method")


def report_config(config: dict[str, Any], provenance: dict[str, Any]) -> dict[str, Any]:
    """The report's keys, the experiments' display names and the shape of the tables, the grids
    whole, and the config's `provenance` (`config_provenance`: the report names its config files and
    hash, so a config edit that reaches any job rebuilds it). The experiments' training and method
    settings stay out (their changes reach the report through the metric files); the grids' stay in:
    the matrix compares each grid method with its baseline by its method arguments and its training
    (`papers.matrix.contrasts`), and what a method can run on and is given depends on its arguments."""
    experiments = {
        name: {k: exp[k] for k in REPORT_EXPERIMENT_KEYS if k in exp} for name, exp in config["experiments"].items()
    }
    for exp in experiments.values():
        exp.setdefault("seeds", config["seeds"])
    return {
        "seeds": config["seeds"],
        "report": config["report"],
        "evaluation": config["evaluation"],
        "analyses": config["analyses"],
        "datasets": config["datasets"],
        "training": {k: config["training"][k] for k in ("arch", "epochs")},
        "experiments": experiments,
        "grids": results_only(config.get("grids", {})),  # without speed-only keys: a thread count reruns nothing
        "sweeps": config.get("sweeps", {}),
        "sweep_points": config.get("sweep_points", {}),
        "provenance": provenance,
        **({"protocols": report_protocols(config)} if config.get("protocols") else {}),  # absent: hash unchanged
        **({"smoke": True} if config.get("smoke") else {}),
    }  # absent when false: real reports keep their hash
