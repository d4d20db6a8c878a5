"""The merge of nested config mappings, shared by the workflow (config layers) and the papers that resolve a
grid run's settings as the workflow does (the methods x benchmarks table's like-for-like baselines)."""

from __future__ import annotations

import copy
from typing import Any


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """`base` with `override` applied key by key (nested dicts merged, other values replaced)."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        out[key] = deep_merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out
