"""A paper config runs its papers' tables, not the demo it is merged over.

Snakemake merges a paper config (`--configfile config/imagenet9.yaml`) over the embedded default,
config/config.yaml, so without a scope every demo experiment and grid would ride along at the paper
config's settings (the demo's MoCo-v2 / BYOL rows at ResNet-50, its Colored MNIST grid). With
`scope.tables_only: true`, which every paper config sets, only these runs stay:

- the runs its protocols name (`protocols.<paper>.runs` and each setting's `runs`): an experiment,
  or `<grid>/<method>`, that grid method on every train variant;
- the runs `scope.extra` keeps, each with the config's reason (a table no protocol covers, or a part
  of the report every config builds): an experiment, `<grid>/<method>`, or a grid's name for all its
  methods (a study such as config/matrix.yaml, whose grids are its table);
- the sweeps of a run that stays (the papers' figures).

Every other experiment, grid method, grid and sweep is dropped before expansion, and the analyses'
experiment lists keep only the runs that stay. Given several paper configs at once, their protocols
and extras add up, so each keeps its own tables.
"""

from __future__ import annotations

import copy
from typing import Any


def named_runs(config: dict[str, Any]) -> set[str]:
    """Every run a protocol of `config` names (experiment names and `<grid>/<method>` as written)."""
    named = set()
    for protocol in config.get("protocols", {}).values():
        named.update(protocol.get("runs", []))
        for setting in protocol.get("settings", []):
            named.update(setting.get("runs", []))
    return named


def scoped(config: dict[str, Any]) -> dict[str, Any]:
    """`config` with only the runs its scope keeps (the module docstring), or unchanged without
    `scope.tables_only`."""
    scope = config.get("scope", {})
    if not scope.get("tables_only"):
        return config
    keep = named_runs(config) | set(scope.get("extra", {}))
    out = copy.deepcopy(config)
    out["experiments"] = {name: exp for name, exp in config["experiments"].items() if name in keep}
    grids = {}
    for name, grid in config.get("grids", {}).items():
        methods = {key: spec for key, spec in grid["methods"].items() if name in keep or f"{name}/{key}" in keep}
        if methods:
            grids[name] = {**copy.deepcopy(grid), "methods": methods}
            if curves := grid.get("curves"):  # the learning-curve figure of the kept methods only
                shown = [m for m in curves["methods"] if m in methods]
                if shown:
                    grids[name]["curves"] = {**curves, "methods": shown}
                else:
                    del grids[name]["curves"]
    out["grids"] = grids
    out["sweeps"] = {
        name: sweep for name, sweep in config.get("sweeps", {}).items() if sweep["experiment"] in out["experiments"]
    }
    for analysis in out["analyses"].values():
        if isinstance(analysis, dict) and "experiments" in analysis:
            analysis["experiments"] = [e for e in analysis["experiments"] if e in out["experiments"]]
    return out
