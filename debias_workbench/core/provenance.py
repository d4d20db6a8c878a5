"""Digests of files and configs, and the code version recorded beside every output."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import debias_workbench


def file_digest(path: Path, algorithm: str) -> str:
    """Hex digest of a file (md5/sha256), read in 1 MiB blocks."""
    digest = hashlib.new(algorithm)
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def job_config_text(cfg: Any, keep_order: bool = False) -> str:
    """The text of a job's config file (`workflow.slices.JobConfigs`); `keep_order`: the keys in their order."""
    return json.dumps(cfg, indent=1, sort_keys=not keep_order) + "\n"


def text_digest(text: str) -> str:
    """The 16 hex digits that name a job's config file (and a prerequisite artifact's file) by its text."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def config_hash(cfg: Any) -> str:
    return hashlib.sha256(json.dumps(cfg, sort_keys=True, default=str).encode()).hexdigest()[:16]


def store_provenance(ds_cfg: dict[str, Any], seed: int) -> dict[str, Any]:
    """What a store's attrs record of how it was made: its dataset's config (in full, and as the hash
    the jobs name), the seed and the code version. Outside the fingerprint (`pipeline.fingerprint`):
    the same data made by another checkout compares equal."""
    return {"config_hash": config_hash(ds_cfg), "seed": seed, "code_version": code_version(), "config": ds_cfg}


def _git(root: Path, *args: str) -> str:
    """The output of `git -C root ARGS`, stripped (raises where git fails or is missing)."""
    return subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, check=True, timeout=10
    ).stdout.strip()


def code_version() -> str:
    """Package version plus the git commit of the checkout (with +dirty if modified)."""
    root = Path(debias_workbench.__file__).resolve().parents[1]
    try:
        commit = _git(root, "rev-parse", "--short=12", "HEAD")
        dirty = _git(root, "status", "--porcelain", "--untracked-files=no")
        return f"{debias_workbench.__version__}+{commit}{'.dirty' if dirty else ''}"
    except (OSError, subprocess.SubprocessError):
        return debias_workbench.__version__
