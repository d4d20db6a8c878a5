# CLAD's analyses of the trained models (Tables 3 and 6, Fig. 6; its jobs: analysis_jobs in workflow.py beside
# this file), one job each over every Background-Challenge run scored on `evaluation.dataset` (MAIN_EXPERIMENTS,
# rules/common.smk) or over the models `analyses.saliency` lists:
# `snakemake --cores 2 results/analysis/consistency.jsonl` builds one alone.
# Uses rules/common.smk: EVAL_DATASET, MAIN_EXPERIMENTS, PY, R, REPORT_ARRAYS, THREADS, analysis_config_file,
# analysis_estimate, res, run_files, small_job_group, small_job_resources, store_args, variant_store.

# each model on the same images as ORIGINAL and MIXED_RAND (Table 3 compares the two)
CLAD_STORES = {v: variant_store(EVAL_DATASET, v) for v in ("original", "mixed_rand")}
CLAD_STORE_ARGS = store_args(CLAD_STORES)
SALIENCY_EXPERIMENTS = config["analyses"]["saliency"]["experiments"]


rule analysis:
    """Table 3 (consistency: feature similarity and decision consistency, ORIGINAL vs
    MIXED_RAND) and Table 6 (fivecrop: corner-crop accuracy drop) over every run."""
    input:
        config=lambda wc: analysis_config_file(wc.analysis),
        models=run_files("model.pt", MAIN_EXPERIMENTS),
        stores=list(CLAD_STORES.values()),
    output:
        rows=f"{R}/analysis/{{analysis}}.jsonl",
    wildcard_constraints:
        analysis="consistency|fivecrop",
    params:
        stores=CLAD_STORE_ARGS,
        py=PY,
    threads: THREADS
    group: small_job_group("analysis", lambda wc: wc.analysis)
    resources:
        **small_job_resources("analysis", lambda wc: wc.analysis, res.rule_resources(config, True, lambda wc: analysis_estimate(wc.analysis))),
    conda:
        "../../../envs/workbench.yaml"
    log:
        f"{R}/logs/analysis_{{analysis}}.log",
    benchmark:
        f"{R}/benchmarks/analysis/analysis_{{analysis}}.tsv",
    shell:
        "OMP_NUM_THREADS={threads} {params.py} -m debias_workbench analyse --analysis {wildcards.analysis} "
        "--config {input.config} --models {input.models} --stores {params.stores} --out {output.rows} "
        "> {log} 2>&1"


rule analysis_saliency:
    """Fig. 6: SmoothGrad maps of the same validation images, and their foreground share."""
    input:
        config=analysis_config_file("saliency"),
        models=run_files("model.pt", SALIENCY_EXPERIMENTS),
        stores=list(CLAD_STORES.values()),
    output:
        rows=f"{R}/analysis/saliency.jsonl",
        arrays=f"{R}/analysis/saliency.npz",
    params:
        stores=CLAD_STORE_ARGS,
        py=PY,
    threads: THREADS
    group: small_job_group("analysis_saliency", lambda wc: "")
    resources:
        **small_job_resources("analysis_saliency", lambda wc: "", res.rule_resources(config, True, lambda wc: analysis_estimate("saliency"))),
    conda:
        "../../../envs/workbench.yaml"
    log:
        f"{R}/logs/analysis_saliency.log",
    benchmark:
        f"{R}/benchmarks/analysis_saliency/analysis_saliency.tsv",
    shell:
        "OMP_NUM_THREADS={threads} {params.py} -m debias_workbench analyse --analysis saliency "
        "--config {input.config} --models {input.models} --stores {params.stores} --out {output.rows} "
        "--arrays {output.arrays} > {log} 2>&1"


if SALIENCY_EXPERIMENTS:  # Fig. 6 reads the maps themselves
    REPORT_ARRAYS["saliency"] = ("--saliency-arrays", rules.analysis_saliency.output.arrays)
