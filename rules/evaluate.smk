# Scorings beside each run's own (rules/runs.smk, which also scores the Background Challenge runs on the
# official test images): Base (IN), a 1000-class ImageNet model, on every val variant of `evaluation.dataset`.
# Uses rules/common.smk: EVAL_DATASET, JOB_CONFIGS, PY, R, THREADS, eval_stores, res, small_job_group,
# small_job_resources, store_args.

EVAL_STORES = eval_stores(EVAL_DATASET)
EVAL_STORE_ARGS = store_args(EVAL_STORES)


rule evaluate_imagenet_model:
    """Base (IN): a 1000-class ImageNet model scored through the IN-1k -> IN-9 mapping."""
    input:
        config=JOB_CONFIGS.path("evaluate_imagenet", imagenet_evaluation_config(config)),
        stores=list(EVAL_STORES.values()),
    output:
        f"{R}/runs/base_in/eval.jsonl",
    params:
        stores=EVAL_STORE_ARGS,
        py=PY,
    threads: THREADS
    group: small_job_group("evaluate_imagenet_model", lambda wc: "")
    resources:
        **small_job_resources("evaluate_imagenet_model", lambda wc: "",
                              res.rule_resources(config, True, lambda wc: res.evaluation(config, len(EVAL_STORES)))),
    conda:
        "../envs/workbench.yaml"
    log:
        f"{R}/logs/evaluate_base_in.log",
    benchmark:
        f"{R}/benchmarks/evaluate_imagenet_model/evaluate_base_in.tsv",
    shell:
        "OMP_NUM_THREADS={threads} {params.py} -m debias_workbench evaluate-imagenet --config {input.config} "
        "--stores {params.stores} --out {output} > {log} 2>&1"
