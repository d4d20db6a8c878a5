# Accuracy of every trained model (and of Base (IN) if configured) on every val variant.

EVAL_STORES = eval_stores(config["evaluation"]["dataset"])
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
    shell:
        "OMP_NUM_THREADS={threads} {params.py} -m training evaluate-imagenet --config {input.config} "
        "--stores {params.stores} --out {output} > {log} 2>&1"


OFFICIAL = config["evaluation"].get("official_dataset")
OFFICIAL_STORES = eval_stores(OFFICIAL) if OFFICIAL else {}
# Every run scored on the variants regenerated here (`evaluate`: eval.jsonl) and, when
# `evaluation.official_dataset` is set, on the official test images read as released
# (`evaluate_official`: eval_official.jsonl); the same job with another config slice and stores.
EVALUATIONS = [("evaluate", "", evaluation_config(config), EVAL_STORES)]
if OFFICIAL:
    EVALUATIONS.append(("evaluate_official", "_official", official_evaluation_config(config), OFFICIAL_STORES))

for _name, _suffix, _eval_cfg, _stores in EVALUATIONS:

    rule:
        name:
            _name
        input:
            config=slice_file(R, "evaluate", _eval_cfg),
            model=rules.train.output.model,
            stores=list(_stores.values()),
        output:
            f"{R}/runs/{{experiment}}/seed{{seed}}/eval{_suffix}.jsonl",
        params:
            stores=store_args(_stores),
            py=PY,
        threads: THREADS
        resources:
            **res.rule_resources(config, True, lambda wc, n=len(_stores): res.evaluation(config, n)),
        conda:
            "../envs/workbench.yaml"
        log:
            f"{R}/logs/{_name}_{{experiment}}_seed{{seed}}.log",
        shell:
            "OMP_NUM_THREADS={threads} {params.py} -m training evaluate --config {input.config} "
            "--model {input.model} --stores {params.stores} --out {output} > {log} 2>&1"
