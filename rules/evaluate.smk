# Accuracy of every trained model (and of Base (IN) if configured) on every val variant.

EVAL_STORES = eval_stores(config["evaluation"]["dataset"])
EVAL_STORE_ARGS = store_args(EVAL_STORES)


rule evaluate:
    input:
        model=rules.train.output.model,
        stores=list(EVAL_STORES.values()),
    output:
        f"{R}/runs/{{experiment}}/seed{{seed}}/eval.jsonl",
    params:
        cfg=CONFIG_JSON,
        stores=EVAL_STORE_ARGS,
    threads: THREADS
    resources:
        gpu=1,
        mem_mb=8000,
        runtime=60,
    conda:
        "../envs/workbench.yaml"
    log:
        f"{R}/logs/evaluate_{{experiment}}_seed{{seed}}.log",
    shell:
        "OMP_NUM_THREADS={threads} {PY} -m training evaluate --config-json {params.cfg:q} "
        "--model {input.model} --stores {params.stores} --out {output} > {log} 2>&1"


rule evaluate_imagenet_model:
    """Base (IN): a 1000-class ImageNet model scored through the IN-1k -> IN-9 mapping."""
    input:
        stores=list(EVAL_STORES.values()),
    output:
        f"{R}/runs/base_in/eval.jsonl",
    params:
        cfg=CONFIG_JSON,
        stores=EVAL_STORE_ARGS,
    threads: THREADS
    resources:
        gpu=1,
        mem_mb=8000,
        runtime=60,
    conda:
        "../envs/workbench.yaml"
    log:
        f"{R}/logs/evaluate_base_in.log",
    shell:
        "OMP_NUM_THREADS={threads} {PY} -m training evaluate-imagenet --config-json {params.cfg:q} "
        "--stores {params.stores} --out {output} > {log} 2>&1"
