# Accuracy of every trained model (and of Base (IN) if configured) on every val variant: of
# `evaluation.dataset`, or of the experiment's own `eval_dataset` (ImageNet-100 runs, 100-way heads).

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
    shell:
        "OMP_NUM_THREADS={threads} {params.py} -m training evaluate-imagenet --config {input.config} "
        "--stores {params.stores} --out {output} > {log} 2>&1"


OFFICIAL = config["evaluation"].get("official_dataset")
OFFICIAL_STORES = eval_stores(OFFICIAL) if OFFICIAL else {}


# Every run scored on the variants regenerated here (`evaluate`: eval.jsonl) and, when
# `evaluation.official_dataset` is set, the runs of the main evaluation dataset on the official
# test images read as released (`evaluate_official`: eval_official.jsonl); the same job with
# another config slice and stores.
EVALUATIONS = [("evaluate", "", run_evaluation, EXPERIMENTS)]
if OFFICIAL:
    EVALUATIONS.append(("evaluate_official", "_official",
                        lambda experiment: (official_evaluation_config(config), OFFICIAL_STORES), MAIN_EXPERIMENTS))

for _name, _suffix, _evaluation, _experiments in EVALUATIONS:
    for _experiment in _experiments:  # each job's config exists before the DAG is built (common.smk: write_job_configs)
        slice_file(R, "evaluate", _evaluation(_experiment)[0])

    rule:
        name:
            _name
        input:
            config=lambda wc, f=_evaluation: slice_file(R, "evaluate", f(wc.experiment)[0]),
            model=rules.train.output.model,
            stores=lambda wc, f=_evaluation: list(f(wc.experiment)[1].values()),
        output:
            f"{R}/runs/{{experiment}}/seed{{seed}}/eval{_suffix}.jsonl",
        wildcard_constraints:
            experiment=one_of(_experiments),
        params:
            stores=lambda wc, f=_evaluation: store_args(f(wc.experiment)[1]),
            py=PY,
        threads: THREADS
        resources:
            **res.rule_resources(config, True,
                                 lambda wc, f=_evaluation: res.evaluation(config, len(f(wc.experiment)[1]))),
        conda:
            "../envs/workbench.yaml"
        log:
            f"{R}/logs/{_name}_{{experiment}}_seed{{seed}}.log",
        shell:
            "OMP_NUM_THREADS={threads} {params.py} -m training evaluate --config {input.config} "
            "--model {input.model} --stores {params.stores} --out {output} > {log} 2>&1"
