# BiasEnsemble's committee (Lee et al., AAAI 2023) as an artifact: K early-stopped GCE models' votes on every
# training row, built by a job of its own and read by every run that uses it (LfF+BE and Park et al. on one train
# variant and seed, whether they train in one job or in several), through the workflow graph: the train jobs of
# those runs take the committee's file as an input (`committees`) and find it by its digest in the folder beside
# --runs-dir. A committee is named by its job config (debias_workbench/training/committee_config.py: the training
# store, seed, training settings and committee arguments), so the runs that would train the same committee share
# one; its job seeds it as the run's set-up did, so a run's weights and metrics are those of a run that trains its
# committee itself.
# Uses rules/common.smk: COMMITTEE_OUTPUT, PY, R, THREADS, committee_inputs, committee_jobs, committee_resources, res,
# small_job_group, small_job_resources.


rule committee:
    """One committee, shared by the runs that read it: its (K, N) p_y and wrong votes and its early-stop statistics."""
    input:
        unpack(committee_inputs),
    output:
        COMMITTEE_OUTPUT,
    wildcard_constraints:
        digest=r"[0-9a-f]{16}",
    params:
        py=lambda wc: res.launcher(PY, res.gpus([committee_jobs()[wc.digest]]), THREADS),
    threads: lambda wc: THREADS * res.gpus([committee_jobs()[wc.digest]])
    group: small_job_group("committee", lambda wc: wc.digest)
    resources:
        **small_job_resources("committee", lambda wc: wc.digest, committee_resources()),
    conda:
        "../envs/workbench.yaml"
    log:
        f"{R}/logs/committee/committee_{{digest}}.log",
    benchmark:
        f"{R}/benchmarks/committee/committee_{{digest}}.tsv",
    shell:
        "OMP_NUM_THREADS={threads} {params.py} -m debias_workbench committee --config {input.config} "
        "--train-store {input.store} --out {output} > {log} 2>&1"
