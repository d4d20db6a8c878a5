# The config file of every job (workflow.slices.JobConfigs): the jobs of the other rule files
# name theirs by its content's hash, and this rule writes it when such a job is to run, in a thread
# of the main process (force-use-threads in profiles/default and profiles/slurm).
# Uses rules/common.smk: JOB_CONFIGS, R, register_job_configs.


rule job_config:
    """A job's config slice (workflow.slices): written here, not while the workflow is parsed, so
    that `snakemake -n` writes nothing; named by its content's hash, so it is made once."""
    output:
        f"{R}/configs/{{kind}}/{{digest}}.json",
    wildcard_constraints:
        kind=r"[a-z_]+",
        digest=r"[0-9a-f]{16}",
    log:
        f"{R}/logs/job_config/{{kind}}_{{digest}}.log",
    localrule: True
    run:
        JOB_CONFIGS.write(output[0], log[0], register_job_configs)
