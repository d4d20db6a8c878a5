"""Debiasing workbench: dataset generation -> training -> evaluation -> report.

    snakemake --cores 2 all                                   # embedded default (minutes, CPU)
    snakemake all --cores 32 --configfile config/imagenet9.yaml
    snakemake --executor slurm --workflow-profile profiles/slurm all
    snakemake --cores 8 results/datasets/in9/mixed_rand.zarr  # one dataset variant

One rule file per stage under rules/; the rules only call `python -m pipeline` and
`python -m training`. The config is validated against config/schema.yaml before anything runs.
"""

import sys

sys.path.insert(0, workflow.basedir)
from pipeline.config import ConfigError, expand_grids, expand_segmentation_comparison, expand_sweeps, validate_config

configfile: "config/config.yaml"

try:
    validate_config(config)
except ConfigError as error:
    sys.exit(str(error))
config.update(expand_segmentation_comparison(config))  # Table 5's U2-Net runs, when configured
config.update(expand_sweeps(config))  # sweep values become experiments of their own
config.update(expand_grids(config))  # one experiment per grid method and train variant

include: "rules/common.smk"
include: "rules/in9_data.smk"
include: "rules/biased_mnist_data.smk"
include: "rules/train.smk"
include: "rules/grids.smk"
include: "rules/evaluate.smk"
include: "rules/analyses.smk"
include: "rules/report.smk"


rule all:
    input:
        REPORT_FILES,
