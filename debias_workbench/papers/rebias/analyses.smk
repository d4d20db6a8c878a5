# ReBias's texture-cluster accuracy of the trained models (Table 2; its job: analysis_jobs in workflow.py beside
# this file), one job over the models `analyses.texture` lists:
# `snakemake --cores 2 results/analysis/texture.jsonl` builds it alone.
# Uses rules/common.smk: EVAL_DATASET, PY, R, THREADS, analysis_config_file, analysis_estimate, res, run_files,
# small_job_group, small_job_resources, store_args, variant_store.

# the ORIGINAL images it clusters and scores, and MIXED_RAND's, which its job has always been handed
TEXTURE_STORES = {v: variant_store(EVAL_DATASET, v) for v in ("original", "mixed_rand")}
TEXTURE_STORE_ARGS = store_args(TEXTURE_STORES)
TEXTURE_EXPERIMENTS = config["analyses"]["texture"]["experiments"]


rule analysis_texture:
    """ReBias Table 2's unbiased accuracy: texture clusters of the validation images (Gram
    features of an early VGG layer, k-means) and every listed model's accuracy per cell."""
    input:
        config=analysis_config_file("texture"),
        models=run_files("model.pt", TEXTURE_EXPERIMENTS),
        stores=list(TEXTURE_STORES.values()),
    output:
        rows=f"{R}/analysis/texture.jsonl",
    params:
        stores=TEXTURE_STORE_ARGS,
        py=PY,
    threads: THREADS
    group: small_job_group("analysis_texture", lambda wc: "")
    resources:
        **small_job_resources("analysis_texture", lambda wc: "", res.rule_resources(config, True, lambda wc: analysis_estimate("texture"))),
    conda:
        "../../../envs/workbench.yaml"
    log:
        f"{R}/logs/analysis_texture.log",
    benchmark:
        f"{R}/benchmarks/analysis_texture/analysis_texture.tsv",
    shell:
        "OMP_NUM_THREADS={threads} {params.py} -m debias_workbench analyse --analysis texture "
        "--config {input.config} --models {input.models} --stores {params.stores} --out {output.rows} "
        "> {log} 2>&1"
