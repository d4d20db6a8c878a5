# One training run per experiment and seed; resumes from its checkpoint after a kill, and only
# from a checkpoint made with the same run config.


def train_inputs(wildcards):
    """The run's config, its training store, and the stores of the variants the method reads
    alongside it."""
    exp = config["experiments"][wildcards.experiment]
    aligned = spec(exp["method"]).aligned_variants
    return {"config": run_config_file(wildcards.experiment, wildcards.seed),
            "store": variant_store(exp["dataset"], exp["train_variant"]),
            **{field: variant_store(exp["dataset"], variant) for field, variant in aligned.items()}}


def aligned_args(wildcards, input):
    exp = config["experiments"][wildcards.experiment]
    return " ".join(f"{field}={input[field]}" for field in spec(exp["method"]).aligned_variants)


rule train:
    input:
        unpack(train_inputs),
    output:
        model=f"{R}/runs/{{experiment}}/seed{{seed}}/model.pt",
        metrics=f"{R}/runs/{{experiment}}/seed{{seed}}/train_metrics.jsonl",
    params:
        run_dir=lambda wc: f"{R}/runs/{wc.experiment}/seed{wc.seed}",
        aligned=aligned_args,
        py=PY,
    threads: THREADS
    resources:
        **res.rule_resources(config, True, lambda wc: res.training([run_config(config, wc.experiment, int(wc.seed))])),
    conda:
        "../envs/workbench.yaml"
    log:
        f"{R}/logs/train_{{experiment}}_seed{{seed}}.log",
    shell:
        "OMP_NUM_THREADS={threads} {params.py} -m training train --config {input.config} "
        "--train-store {input.store} --run-dir {params.run_dir} --aligned-stores {params.aligned} > {log} 2>&1"
