"""The config schema accepts the shipped configs and names the key of every bad value."""

import copy
import subprocess
import sys

import pytest
import yaml

from pipeline.config import ConfigError, validate_config
from training.trainer import deep_merge

from .conftest import ROOT


def test_shipped_configs_are_valid(default_config):
    validate_config(default_config)
    for name in ("imagenet9.yaml", "photos-dev.yaml"):
        validate_config(deep_merge(default_config, yaml.safe_load((ROOT / "config" / name).read_text())))


@pytest.mark.parametrize("path, value, key", [
    (("training", "epochs"), 0, "training.epochs"),
    (("datasets", "in9", "segmentation", "method"), "watershed", "datasets.in9.segmentation.method"),
    (("datasets", "in9", "variants"), ["original", "mixed_weird"], "datasets.in9.variants.1"),
    (("datasets", "in9", "source", "kind"), "flickr", "datasets.in9.source.kind"),
    (("training", "optimizer", "lr"), -1, "training.optimizer.lr"),
    (("seeds",), [], "seeds"),
])
def test_bad_values_name_their_key(default_config, path, value, key):
    cfg = copy.deepcopy(default_config)
    node = cfg
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        validate_config(cfg)


def test_unknown_keys_and_cross_references(default_config):
    cfg = copy.deepcopy(default_config)
    cfg["training"]["epoch"] = 3  # a typo must not be silently ignored
    with pytest.raises(ConfigError, match="epoch"):
        validate_config(cfg)
    cfg = copy.deepcopy(default_config)
    cfg["experiments"]["base_in9"]["method"] = "magic"
    with pytest.raises(ConfigError, match="experiments.base_in9.method"):
        validate_config(cfg)


def test_snakemake_stops_at_start_on_a_bad_value(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--config", "seed=-3"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert "seed" in proc.stdout + proc.stderr and "minimum" in proc.stdout + proc.stderr
