# One training run per experiment and seed; resumes from its checkpoint after a kill.


def train_inputs(wildcards):
    """The training store, and the stores of the variants the method reads alongside it."""
    exp = config["experiments"][wildcards.experiment]
    aligned = METHODS[exp["method"]].aligned_variants
    return {"store": variant_store(exp["dataset"], exp["train_variant"]),
            **{field: variant_store(exp["dataset"], variant) for field, variant in aligned.items()}}


def aligned_args(wildcards, input):
    exp = config["experiments"][wildcards.experiment]
    return " ".join(f"{field}={input[field]}" for field in METHODS[exp["method"]].aligned_variants)


rule train:
    input:
        unpack(train_inputs),
    output:
        model=f"{R}/runs/{{experiment}}/seed{{seed}}/model.pt",
        metrics=f"{R}/runs/{{experiment}}/seed{{seed}}/train_metrics.jsonl",
    params:
        cfg=CONFIG_JSON,
        run_dir=lambda wc: f"{R}/runs/{wc.experiment}/seed{wc.seed}",
        aligned=aligned_args,
    threads: THREADS
    resources:
        gpu=1,
        mem_mb=16000,
        runtime=1440,
    conda:
        "../envs/workbench.yaml"
    log:
        f"{R}/logs/train_{{experiment}}_seed{{seed}}.log",
    shell:
        "OMP_NUM_THREADS={threads} {PY} -m training train --config-json {params.cfg:q} "
        "--experiment {wildcards.experiment} --seed {wildcards.seed} --train-store {input.store} "
        "--run-dir {params.run_dir} --aligned-stores {params.aligned} > {log} 2>&1"
