"""The reproducible workbench for image-classification debiasing research.

Layers, each a subpackage that imports only those below it (tests/test_run_identity.py):

    workflow/   the Snakemake workflow's config layer: validation, expansion, job slices, resources
    report/     the report, from tidy metric rows, manifests and stores
    training/   models, methods, evaluation and analyses
    pipeline/   dataset generation into zarr stores, fingerprints
    core/       plumbing every layer may import

The command line is `workbench` (`debias_workbench.cli`); the workflow's rules call the same
entry points through `python -m debias_workbench`.
"""

__version__ = "0.1.0"
