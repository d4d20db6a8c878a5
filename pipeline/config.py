"""Validation of the workflow config against `config/schema.yaml`, with messages naming the key."""

from __future__ import annotations

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
        if exp["method"] not in METHODS:
            problems.append(f"experiments.{name}.method: {exp['method']!r} is not a registered method {sorted(METHODS)}")
        if exp["dataset"] not in config["datasets"]:
            problems.append(f"experiments.{name}.dataset: {exp['dataset']!r} is not in `datasets`")
        elif exp["train_variant"] not in config["datasets"][exp["dataset"]]["variants"]:
            problems.append(f"experiments.{name}.train_variant: {exp['train_variant']!r} is not a built variant")
    if config["evaluation"]["dataset"] not in config["datasets"]:
        problems.append(f"evaluation.dataset: {config['evaluation']['dataset']!r} is not in `datasets`")
    if problems:
        raise ConfigError("invalid workflow config:\n" + "\n".join(f"  {p}" for p in problems))
