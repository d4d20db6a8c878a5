# A method's prerequisite artifacts (debias_workbench/training/prerequisite_kind.py; the kinds are registered beside
# the methods, training/methods/__init__.py), each built by a job of its own and read by every run that needs it, whether those runs train in one
# job or in several, through the workflow graph: the train jobs of those runs take its file as an input
# (`prerequisites`) and find it by its kind and digest under the results folder. One is named by its job config
# (debias_workbench/training/prerequisites.py: the training store, seed, training settings and its kind's
# arguments), so the runs that would make the same one share it; its job seeds it as the run's set-up would, so a
# run's weights and metrics are those of a run that makes it itself.
# Uses rules/common.smk: PREREQUISITE_OUTPUT, PY, R, THREADS, prerequisite_inputs, prerequisite_jobs,
# prerequisite_resources, res, small_job_group, small_job_resources.


rule prerequisite:
    """One prerequisite artifact, shared by the runs that read it (its kind's builder writes its file)."""
    input:
        unpack(prerequisite_inputs),
    output:
        PREREQUISITE_OUTPUT,
    wildcard_constraints:
        kind="|".join(PREREQUISITES),
        digest=r"[0-9a-f]{16}",
    params:
        py=lambda wc: res.launcher(PY, res.gpus([prerequisite_jobs()[wc.kind, wc.digest].config]), THREADS),
    threads: lambda wc: THREADS * res.gpus([prerequisite_jobs()[wc.kind, wc.digest].config])
    group: small_job_group("prerequisite", lambda wc: wc.digest)
    resources:
        **small_job_resources("prerequisite", lambda wc: wc.digest, prerequisite_resources()),
    conda:
        "../envs/workbench.yaml"
    log:
        f"{R}/logs/prerequisite/{{kind}}_{{digest}}.log",
    benchmark:
        f"{R}/benchmarks/prerequisite/{{kind}}_{{digest}}.tsv",
    shell:
        "OMP_NUM_THREADS={threads} {params.py} -m debias_workbench prerequisite --kind {wildcards.kind} "
        "--config {input.config} --train-store {input.store} --out {output} > {log} 2>&1"
