# The CLAD paper's analyses of the trained models (Tables 3 and 6, Fig. 6), one job each over
# every Background-Challenge run scored on `evaluation.dataset` (MAIN_EXPERIMENTS, rules/common.smk),
# and ReBias's texture-cluster accuracy (Table 2):
# `snakemake --cores 2 results/analysis/consistency.jsonl` builds one alone.
# Uses rules/common.smk: MAIN_EXPERIMENTS, PY, R, THREADS, analysis_config_file, res, run_files, small_job_group,
# small_job_resources, store_args, variant_store.

ANALYSIS_STORES = {v: variant_store(config["evaluation"]["dataset"], v) for v in ("original", "mixed_rand")}
ANALYSIS_STORE_ARGS = store_args(ANALYSIS_STORES)
SALIENCY_EXPERIMENTS = config["analyses"]["saliency"]["experiments"]
TEXTURE = config["analyses"]["texture"]
# each analysis where it has models: a grids-only config (config/matrix.yaml) maps no saliency
ANALYSIS_FILES = [f"{R}/analysis/{name}.jsonl" for name in ("consistency", "fivecrop") if MAIN_EXPERIMENTS]
if SALIENCY_EXPERIMENTS:
    ANALYSIS_FILES.append(f"{R}/analysis/saliency.jsonl")
if TEXTURE["experiments"] and (TEXTURE["vgg"] or TEXTURE.get("vgg16")):
    ANALYSIS_FILES.append(f"{R}/analysis/texture.jsonl")


rule analysis:
    """Table 3 (consistency: feature similarity and decision consistency, ORIGINAL vs
    MIXED_RAND) and Table 6 (fivecrop: corner-crop accuracy drop) over every run."""
    input:
        config=lambda wc: analysis_config_file(wc.analysis),
        models=run_files("model.pt", MAIN_EXPERIMENTS),
        stores=list(ANALYSIS_STORES.values()),
    output:
        rows=f"{R}/analysis/{{analysis}}.jsonl",
    wildcard_constraints:
        analysis="consistency|fivecrop",
    params:
        stores=ANALYSIS_STORE_ARGS,
        py=PY,
    threads: THREADS
    group: small_job_group("analysis", lambda wc: wc.analysis)
    resources:
        **small_job_resources("analysis", lambda wc: wc.analysis, res.rule_resources(config, True, lambda wc: res.evaluation(config, 2, len(run_files("model.pt", MAIN_EXPERIMENTS))))),
    conda:
        "../envs/workbench.yaml"
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
        stores=list(ANALYSIS_STORES.values()),
    output:
        rows=f"{R}/analysis/saliency.jsonl",
        arrays=f"{R}/analysis/saliency.npz",
    params:
        stores=ANALYSIS_STORE_ARGS,
        py=PY,
    threads: THREADS
    group: small_job_group("analysis_saliency", lambda wc: "")
    resources:
        **small_job_resources("analysis_saliency", lambda wc: "", res.rule_resources(config, True, lambda wc: res.evaluation(config, 1, len(run_files("model.pt", SALIENCY_EXPERIMENTS))))),
    conda:
        "../envs/workbench.yaml"
    log:
        f"{R}/logs/analysis_saliency.log",
    benchmark:
        f"{R}/benchmarks/analysis_saliency/analysis_saliency.tsv",
    shell:
        "OMP_NUM_THREADS={threads} {params.py} -m debias_workbench analyse --analysis saliency "
        "--config {input.config} --models {input.models} --stores {params.stores} --out {output.rows} "
        "--arrays {output.arrays} > {log} 2>&1"


rule analysis_texture:
    """ReBias Table 2's unbiased accuracy: texture clusters of the validation images (Gram
    features of an early VGG layer, k-means) and every listed model's accuracy per cell."""
    input:
        config=analysis_config_file("texture"),
        models=run_files("model.pt", TEXTURE["experiments"]),
        stores=list(ANALYSIS_STORES.values()),
    output:
        rows=f"{R}/analysis/texture.jsonl",
    params:
        stores=ANALYSIS_STORE_ARGS,
        py=PY,
    threads: THREADS
    group: small_job_group("analysis_texture", lambda wc: "")
    resources:
        **small_job_resources("analysis_texture", lambda wc: "", res.rule_resources(config, True, lambda wc: res.evaluation(config, 1, 1 + len(run_files("model.pt", TEXTURE["experiments"]))))),
    conda:
        "../envs/workbench.yaml"
    log:
        f"{R}/logs/analysis_texture.log",
    benchmark:
        f"{R}/benchmarks/analysis_texture/analysis_texture.tsv",
    shell:
        "OMP_NUM_THREADS={threads} {params.py} -m debias_workbench analyse --analysis texture "
        "--config {input.config} --models {input.models} --stores {params.stores} --out {output.rows} "
        "> {log} 2>&1"
