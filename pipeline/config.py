"""Validation of the workflow config against `config/schema.yaml`, with messages naming the key."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonschema
import yaml

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "config" / "schema.yaml"


class ConfigError(ValueError):
    pass


def validate_config(config: dict[str, Any], schema_path: Path = SCHEMA_PATH) -> dict[str, Any]:
    """Raise `ConfigError` listing every invalid key (as a dotted path) with the rule it breaks."""
    schema = yaml.safe_load(Path(schema_path).read_text())
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        lines = [f"  {'.'.join(map(str, e.absolute_path)) or '<top level>'}: {e.message}" for e in errors]
        raise ConfigError("invalid workflow config:\n" + "\n".join(lines))
    _check_cross_references(config)
    return config


def _check_cross_references(config: dict[str, Any]) -> None:
    from training.methods import METHODS  # lazy: keeps pipeline importable without torch-side modules loaded

    problems = []
    for name, exp in config["experiments"].items():
        method = METHODS.get(exp["method"])
        if method is None:
            problems.append(f"experiments.{name}.method: {exp['method']!r} is not a registered method {sorted(METHODS)}")
        elif unknown := set(exp.get("method_args", {})) - set(method.default_args):
            problems.append(f"experiments.{name}.method_args: {sorted(unknown)} not taken by {exp['method']!r} "
                            f"(it takes {sorted(method.default_args)})")
        if exp["dataset"] not in config["datasets"]:
            problems.append(f"experiments.{name}.dataset: {exp['dataset']!r} is not in `datasets`")
            continue
        built = config["datasets"][exp["dataset"]]["variants"]
        needed = [exp["train_variant"], *(method.aligned_variants.values() if method else [])]
        for variant in needed:
            if variant not in built:
                problems.append(f"experiments.{name}: method {exp['method']!r} reads variant {variant!r}, which "
                                f"datasets.{exp['dataset']}.variants does not build; add it there")
    for name, sweep in config.get("sweeps", {}).items():
        base = config["experiments"].get(sweep["experiment"])
        if base is None:
            problems.append(f"sweeps.{name}.experiment: {sweep['experiment']!r} is not in `experiments`")
        elif base["method"] in METHODS and sweep["arg"] not in METHODS[base["method"]].default_args:
            problems.append(f"sweeps.{name}.arg: {base['method']!r} takes no argument {sweep['arg']!r} "
                            f"(it takes {sorted(METHODS[base['method']].default_args)})")
    for name in config["analyses"]["saliency"]["experiments"]:
        if name not in config["experiments"]:
            problems.append(f"analyses.saliency.experiments: {name!r} is not in `experiments`")
    if config["evaluation"]["dataset"] not in config["datasets"]:
        problems.append(f"evaluation.dataset: {config['evaluation']['dataset']!r} is not in `datasets`")
    if problems:
        raise ConfigError("invalid workflow config:\n" + "\n".join(f"  {p}" for p in problems))


def expand_sweeps(config: dict[str, Any]) -> dict[str, Any]:
    """The config with one experiment per sweep value added (`<base>_<arg>_<value>`).

    A sweep value equal to the base experiment's own value is that experiment itself. Each
    expanded experiment records `sweep: {name, value}` for the report; `sweep_points`
    lists (value, experiment) per sweep.
    """
    from training.methods import METHODS

    out = copy.deepcopy(config)
    for name, sweep in config.get("sweeps", {}).items():
        base = config["experiments"][sweep["experiment"]]
        args = {**METHODS[base["method"]].default_args, **base.get("method_args", {})}
        points = []
        for value in sweep["values"]:
            if value == args[sweep["arg"]]:
                points.append([value, sweep["experiment"]])
                continue
            exp_name = f"{sweep['experiment']}_{sweep['arg']}_{_slug(value)}"
            out["experiments"][exp_name] = {
                **copy.deepcopy(base), "label": f"{base['label']} {sweep['arg']}={value:g}",
                "method_args": {**base.get("method_args", {}), sweep["arg"]: value},
                "seeds": sweep.get("seeds", base.get("seeds", config["seeds"])),
            }
            points.append([value, exp_name])
        out.setdefault("sweep_points", {})[name] = {"arg": sweep["arg"], "points": points}
    return out


def expand_segmentation_comparison(config: dict[str, Any]) -> dict[str, Any]:
    """Table 5 (GrabCut vs U2-Net): with `analyses.u2net_model` set, the evaluation dataset is
    also built with U2-Net masks (`<dataset>_u2net`, the variants CLAD trains on) and every
    CLAD / CLAD+ experiment on it is repeated there (`<experiment>_u2net`). Evaluation stays on
    the GrabCut-built test set, so the two differ only in the training masks."""
    model = config["analyses"].get("u2net_model")
    if not model:
        return config
    out = copy.deepcopy(config)
    base = config["evaluation"]["dataset"]
    ds = copy.deepcopy(config["datasets"][base])
    ds["segmentation"].update(method="u2net", u2net_model=model)
    ds["variants"] = ["original", "only_bg_t"]
    out["datasets"][f"{base}_u2net"] = ds
    for name, exp in config["experiments"].items():
        if exp["method"] in ("clad", "clad_plus") and exp["dataset"] == base:
            out["experiments"][f"{name}_u2net"] = {**copy.deepcopy(exp), "dataset": f"{base}_u2net",
                                                   "label": f"{exp['label']} (U2-Net)"}
    return out


def _slug(value: float) -> str:
    return f"{value:g}".replace("-", "m").replace(".", "p").replace("+", "")


def runs(config: dict[str, Any]) -> list[tuple[str, int]]:
    """Every (experiment, seed) training run of an expanded config."""
    return [(name, seed) for name, exp in config["experiments"].items() for seed in exp.get("seeds", config["seeds"])]
