# One training run per experiment and seed; resumes from its checkpoint after a kill, and only
# from a checkpoint made with the same run config.


rule train:
    input:
        unpack(train_inputs),
    output:
        model=f"{R}/runs/{{experiment}}/seed{{seed}}/model.pt",
        metrics=f"{R}/runs/{{experiment}}/seed{{seed}}/train_metrics.jsonl",
    params:
        run_dir=lambda wc: f"{R}/runs/{wc.experiment}/seed{wc.seed}",
        aligned=aligned_args,
        # `training.gpus` N > 1: torchrun with N processes of THREADS threads each (res.launcher)
        py=lambda wc: res.launcher(PY, res.gpus(train_runs(wc)), THREADS),
    threads: lambda wc: THREADS * res.gpus(train_runs(wc))
    resources:
        **res.rule_resources(config, True, lambda wc: res.training(train_runs(wc)), lambda wc: res.gpus(train_runs(wc))),
    conda:
        "../envs/workbench.yaml"
    log:
        f"{R}/logs/train_{{experiment}}_seed{{seed}}.log",
    shell:
        "OMP_NUM_THREADS={threads} {params.py} -m training train --config {input.config} "
        "--train-store {input.store} --run-dir {params.run_dir} --aligned-stores {params.aligned} > {log} 2>&1"
