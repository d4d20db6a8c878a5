# One training run per experiment and seed; resumes from its checkpoint after a kill.


def train_store(wildcards):
    exp = config["experiments"][wildcards.experiment]
    return variant_store(exp["dataset"], exp["train_variant"])


rule train:
    input:
        train_store,
    output:
        model=f"{R}/runs/{{experiment}}/seed{{seed}}/model.pt",
        metrics=f"{R}/runs/{{experiment}}/seed{{seed}}/train_metrics.jsonl",
    params:
        cfg=CONFIG_JSON,
        run_dir=lambda wc: f"{R}/runs/{wc.experiment}/seed{wc.seed}",
    threads: 2
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
        "--experiment {wildcards.experiment} --seed {wildcards.seed} --train-store {input} "
        "--run-dir {params.run_dir} > {log} 2>&1"
