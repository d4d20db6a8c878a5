# Scorings beside each run's own (rules/runs.smk): Base (IN), a 1000-class ImageNet model, on every
# val variant of `evaluation.dataset`, and the Background Challenge runs on the official test images.

EVAL_STORES = eval_stores(EVAL_DATASET)
EVAL_STORE_ARGS = store_args(EVAL_STORES)


rule evaluate_imagenet_model:
    """Base (IN): a 1000-class ImageNet model scored through the IN-1k -> IN-9 mapping."""
    input:
        config=slice_file(R, "evaluate_imagenet", imagenet_evaluation_config(config)),
        stores=list(EVAL_STORES.values()),
    output:
        f"{R}/runs/base_in/eval.jsonl",
    params:
        stores=EVAL_STORE_ARGS,
        py=PY,
    threads: THREADS
    resources:
        **res.rule_resources(config, True, lambda wc: res.evaluation(config, len(EVAL_STORES))),
    conda:
        "../envs/workbench.yaml"
    log:
        f"{R}/logs/evaluate_base_in.log",
    benchmark:
        f"{R}/benchmarks/evaluate_imagenet_model/evaluate_base_in.tsv",
    shell:
        "OMP_NUM_THREADS={threads} {params.py} -m training evaluate-imagenet --config {input.config} "
        "--stores {params.stores} --out {output} > {log} 2>&1"


OFFICIAL = config["evaluation"].get("official_dataset")
OFFICIAL_STORES = eval_stores(OFFICIAL) if OFFICIAL else {}


# With `evaluation.official_dataset` set, the Background Challenge runs are also scored on the official
# test images read as released (eval_official.jsonl).
if OFFICIAL:

    rule evaluate_official:
        input:
            config=slice_file(R, "evaluate", official_evaluation_config(config)),
            model=f"{R}/runs/{{experiment}}/seed{{seed}}/model.pt",
            stores=list(OFFICIAL_STORES.values()),
        output:
            f"{R}/runs/{{experiment}}/seed{{seed}}/eval_official.jsonl",
        wildcard_constraints:
            experiment=one_of(MAIN_EXPERIMENTS),
        params:
            stores=store_args(OFFICIAL_STORES),
            py=PY,
        threads: THREADS
        resources:
            **res.rule_resources(config, True, lambda wc: res.evaluation(config, len(OFFICIAL_STORES))),
        conda:
            "../envs/workbench.yaml"
        log:
            f"{R}/logs/evaluate_official_{{experiment}}_seed{{seed}}.log",
        benchmark:
            f"{R}/benchmarks/evaluate_official/evaluate_official_{{experiment}}_seed{{seed}}.tsv",
        shell:
            "OMP_NUM_THREADS={threads} {params.py} -m training evaluate --config {input.config} "
            "--models {input.model} --stores {params.stores} --out {output} > {log} 2>&1"
