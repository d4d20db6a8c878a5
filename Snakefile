"""Debiasing workbench: dataset generation -> training -> evaluation -> report.

    snakemake --cores 2 all                                   # embedded default (minutes, CPU)
    snakemake all --cores 32 --configfile config/imagenet9.yaml
    snakemake --executor slurm --workflow-profile profiles/slurm all
    snakemake --cores 8 results/datasets/in9/mixed_rand.zarr  # one dataset variant

One rule file per stage under rules/; the rules only call the `workbench` command (as `python -m
debias_workbench`), each job with its own config slice (debias_workbench/workflow/slices.py). The config
is validated against config/schema.yaml and the methods' declarations before anything runs.
"""

import sys

sys.path.insert(0, workflow.basedir)
from debias_workbench.pipeline.datasets import rule_files as family_rule_files
from debias_workbench.workflow.config import ConfigError, resolve_config
from debias_workbench.workflow.paper_hooks import rule_files as paper_rule_files
from debias_workbench.workflow.resources import local_gpu_cap
from debias_workbench.workflow.scope import scoped
from debias_workbench.workflow.user_paths import missing_paths


configfile: "config/config.yaml"


try:
    resolved = resolve_config(config)
except ConfigError as error:
    sys.exit(str(error))
if missing := missing_paths(scoped(config)):  # of the runs it plans; before the graph: a job that cannot run must not leave an old output standing
    sys.exit("the config names files or folders that are not there:\n" + "\n".join(f"  {m}" for m in missing))
config.update(resolved)  # sweeps, grids and Table 5's U2-Net runs become runs of their own
NODE_GPU_CAP = None  # the node's GPUs as the `gpu` limit, where no limit was given (onstart names it on a cluster)
if workflow.local_exec and not workflow.remote_exec and "gpu" not in workflow.global_resources:
    if (NODE_GPU_CAP := local_gpu_cap(None)) is not None:  # at most one GPU job per visible GPU at once
        workflow.global_resources["gpu"] = NODE_GPU_CAP


include: "rules/common.smk"
include: "rules/job_configs.smk"
for _rule_file in family_rule_files():  # each dataset family's own stages (DatasetFamily.rule_files)

    include: _rule_file


include: "rules/whole_variants.smk"
include: "rules/prerequisites.smk"
include: "rules/runs.smk"
include: "rules/evaluate.smk"
for _rule_file in paper_rule_files():  # each paper's own rules (its analyses: workflow.paper_hooks)

    include: _rule_file


include: "rules/report.smk"


localrules:
    all,


rule all:
    default_target: True
    input:
        REPORT_FILES,
