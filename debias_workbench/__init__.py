"""The reproducible workbench for image-classification debiasing research.

Layers, each a subpackage that imports only those below it (tests/test_run_identity.py):

    workflow/   the Snakemake workflow's config layer: validation, expansion, job slices, resources
    report/     the report, from tidy metric rows, manifests and stores
    training/   models, methods, evaluation and analyses
    pipeline/   dataset generation into zarr stores, fingerprints
    core/       plumbing every layer may import

The command line is `workbench` (`debias_workbench.cli`); the workflow's rules call the same
entry points through `python -m debias_workbench`. For one's own code: `load_variant(store, split)`,
a generated variant as a PyTorch dataset (`training.variant_dataset`; imported on first use, so
that `workbench verify` and the config layer load no torch).
"""

from __future__ import annotations

from typing import Any

__version__ = "0.3.0"

#: the public names, and the modules that hold them (imported on first use)
_PUBLIC = {"load_variant": "debias_workbench.training.variant_dataset"}
__all__ = ["load_variant", "__version__"]


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        import importlib

        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'debias_workbench' has no attribute {name!r}")
