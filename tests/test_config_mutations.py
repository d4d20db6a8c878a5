"""200 seeded random mutations of the demo config (config/config.yaml): wrong types, unknown keys at
every level, out-of-range values, removed keys and dangling references. Each must either resolve
(the Snakefile's `resolve_config`) or stop with a `ConfigError` naming the mutated key as a dotted
path: never a traceback from deeper in the code, never a message a user cannot act on."""

from __future__ import annotations

import copy
import random
from collections import Counter
from typing import Any

import pytest

from debias_workbench.workflow.config import ConfigError, resolve_config

MUTATIONS = 200
Path_ = tuple  # a dotted key as a tuple of dict keys and list indices


def nodes(tree: Any, path: Path_ = ()) -> list[tuple[Path_, Any]]:
    """Every (path, value) below the root, depth first, in the file's order."""
    out = []
    items = tree.items() if isinstance(tree, dict) else enumerate(tree) if isinstance(tree, list) else []
    for key, value in items:
        out.append(((*path, key), value))
        out += nodes(value, (*path, key))
    return out


def get(tree: Any, path: Path_) -> Any:
    for key in path:
        tree = tree[key]
    return tree


def dotted(path: Path_) -> str:
    return ".".join(map(str, path))


def other_type(value: Any, rng: random.Random) -> Any:
    """A value of another JSON type than `value`."""
    choices = ["text", 3.5, 7, True, None, [1, "a"], {"x": 1}]
    kind = type(value)
    return rng.choice([c for c in choices if type(c) is not kind and not (kind in (int, float) and type(c) in (int, float))])


def out_of_range(value: Any, rng: random.Random) -> Any:
    """A value of the same type outside any sensible range."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return rng.choice([-1, 0, -0.5, 1e12, -(10**9)])
    if isinstance(value, str):
        return rng.choice(["", "no_such_thing", value + "_typo"])
    if isinstance(value, list):
        return rng.choice([[], value + value[:1]])  # empty, or a duplicated entry
    return {}


#: (dotted key, dangling value) pairs: names that must refer to something that exists
REFERENCES = [
    (("experiments", "clad", "dataset"), "in10"),
    (("experiments", "base_mr", "train_variant"), "mixed_nowhere"),
    (("experiments", "moco", "method"), "moco_v4"),
    (("evaluation", "dataset"), "in8"),
    (("grids", "rebias_mnist", "dataset"), "mnist_nowhere"),
    (("grids", "rebias_mnist", "figure_variant"), "rho_0.9"),
    (("grids", "park_cmnist", "train_variants", 1), "conflict_3"),
    (("grids", "rebias_mnist", "curves", "methods", 1), "rebias_plus"),
    (("grids", "rebias_mnist", "curves", "test_set"), "nowhere"),
    (("analyses", "saliency", "experiments", 2), "clad_nowhere"),
    (("grids", "park_cmnist", "methods", "ours", "method"), "ours_nowhere"),
]


def mutate(config: dict, rng: random.Random) -> tuple[str, Path_, dict]:
    """(kind, dotted key, mutated copy) of one random mutation."""
    cfg = copy.deepcopy(config)
    kind = rng.choice(["wrong type", "unknown key", "out of range", "removed key", "dangling reference"])
    if kind == "dangling reference":
        path, value = rng.choice(REFERENCES)
        get(cfg, path[:-1])[path[-1]] = value
        return kind, path, cfg
    if kind == "unknown key":
        path, _ = rng.choice([(p, v) for p, v in [((), cfg), *nodes(cfg)] if isinstance(v, dict)])
        key = f"zz_{rng.randrange(1000)}"
        get(cfg, path)[key] = rng.choice([1, "x", {"y": 2}])
        return kind, (*path, key), cfg
    if kind == "removed key":
        path, _ = rng.choice([(p, v) for p, v in nodes(cfg) if isinstance(p[-1], str)])
        del get(cfg, path[:-1])[path[-1]]
        return kind, path, cfg
    path, value = rng.choice(nodes(cfg))
    get(cfg, path[:-1])[path[-1]] = other_type(value, rng) if kind == "wrong type" else out_of_range(value, rng)
    return kind, path, cfg


def names_key(message: str, path: Path_) -> bool:
    """The message names the mutated key: its dotted path (a list entry: the list's), or its parent's
    path together with its name (jsonschema reports an unknown or missing key at the object holding it)."""
    if dotted(path) in message:
        return True
    if isinstance(path[-1], int) and dotted(path[:-1]) in message:  # a list's entry: the list and its bad value
        return True
    for cut in range(len(path) - 1, -1, -1):  # an ancestor's path and the key's own name
        parent = dotted(path[:cut]) or "<top level>"
        if parent in message and str(path[-1]) in message:
            return True
    return False


def test_200_config_mutations_resolve_or_name_their_key(default_config):
    rng = random.Random("config-mutations")
    outcomes: Counter[str] = Counter()
    failures = []
    for i in range(MUTATIONS):
        kind, path, cfg = mutate(default_config, rng)
        try:
            resolve_config(cfg)
        except ConfigError as error:
            outcomes[f"{kind}: stopped"] += 1
            if not names_key(str(error), path):
                failures.append(f"#{i} {kind} at {dotted(path)}: the error does not name it:\n{error}")
        except Exception as error:  # noqa: BLE001 - any other exception is the failure this test looks for
            failures.append(f"#{i} {kind} at {dotted(path)}: {type(error).__name__}: {error}")
        else:
            outcomes[f"{kind}: valid"] += 1
    print(dict(sorted(outcomes.items())))
    assert not failures, "\n\n".join(failures[:10]) + f"\n\n({len(failures)} of {MUTATIONS})"
    assert sum(outcomes.values()) == MUTATIONS
    assert sum(n for k, n in outcomes.items() if k.endswith("stopped")) >= MUTATIONS // 2  # most are caught


@pytest.mark.parametrize("path, value", REFERENCES)
def test_every_dangling_reference_is_named(default_config, path, value):
    cfg = copy.deepcopy(default_config)
    get(cfg, path[:-1])[path[-1]] = value
    with pytest.raises(ConfigError) as error:
        resolve_config(cfg)
    assert names_key(str(error.value), path), str(error.value)
