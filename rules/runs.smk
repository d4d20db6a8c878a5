# Every training run, declared alone or by a grid, is one kind of run: trained by a `train` job and
# scored on the test sets its dataset family declares by an `evaluate` job. A pack (`PACKS`,
# workbench.config.packs) is only how many runs share those jobs' processes: one run per job for
# the runs declared alone (rules `train` and `evaluate`, one job per experiment and seed), a grid's
# small runs of one train variant and seed together (rules `train_<grid>` and `evaluate_<grid>`,
# `_2`, `_3`, ... where seed groups or `pack` split them). A run resumes from its checkpoint
# after a kill, and only from a checkpoint made with the same run config.

for _pack in PACKS:
    _runs = _pack.members  # experiment-name patterns of one job
    _tag = "_".join(f"{{{w}}}" for w in _pack.constraints if w != "seed")

    rule:
        name:
            f"train{_pack.name}"
        input:
            unpack(lambda wc, p=_pack: train_inputs(p, wc)),
        output:
            [f"{R}/runs/{m}/seed{{seed}}/{f}" for m in _runs for f in ("model.pt", "train_metrics.jsonl")],
        wildcard_constraints:
            **{w: one_of(v) for w, v in _pack.constraints.items()},
        params:
            aligned=lambda wc, input: named_inputs_args(input),
            tests=lambda wc, input: named_inputs_args(input, "test_"),
            # `training.gpus` N > 1: torchrun with N processes of THREADS threads each (res.launcher)
            py=lambda wc, p=_pack: res.launcher(PY, res.gpus(pack_runs(p, wc)), THREADS),
        threads: lambda wc, p=_pack: THREADS * res.gpus(pack_runs(p, wc))
        resources:
            **res.rule_resources(config, True, lambda wc, p=_pack: res.training(pack_runs(p, wc)),
                                 lambda wc, p=_pack: res.gpus(pack_runs(p, wc))),
        conda:
            "../envs/workbench.yaml"
        log:
            f"{R}/logs/train{_pack.name}_{_tag}_seed{{seed}}.log",
        benchmark:
            f"{R}/benchmarks/train{_pack.name}/train{_pack.name}_{_tag}_seed{{seed}}.tsv",
        shell:
            "OMP_NUM_THREADS={threads} {params.py} -m training train --config {input.config} --train-store {input.store} "
            f"--runs-dir {R}/runs --aligned-stores {{params.aligned}} --test-stores {{params.tests}} > {{log}} 2>&1"

    rule:
        name:
            f"evaluate{_pack.name}"
        input:
            config=lambda wc, p=_pack: slice_file(R, "evaluate", scoring_config(config, pack_scored(p, wc))),
            models=[f"{R}/runs/{m}/seed{{seed}}/model.pt" for m in _runs],
            stores=lambda wc, p=_pack: list(test_stores(pack_scored(p, wc)).values()),
        output:
            [f"{R}/runs/{m}/seed{{seed}}/eval.jsonl" for m in _runs],
        wildcard_constraints:
            **{w: one_of(v) for w, v in _pack.constraints.items()},
        params:
            stores=lambda wc, p=_pack: store_args(test_stores(pack_scored(p, wc))),
            py=PY,
        threads: THREADS
        resources:
            **res.rule_resources(config, True, lambda wc, p=_pack: res.evaluation(
                config, len(test_stores(pack_scored(p, wc))), len(p.members), scoring(config, pack_scored(p, wc))[0])),
        conda:
            "../envs/workbench.yaml"
        log:
            f"{R}/logs/evaluate{_pack.name}_{_tag}_seed{{seed}}.log",
        benchmark:
            f"{R}/benchmarks/evaluate{_pack.name}/evaluate{_pack.name}_{_tag}_seed{{seed}}.tsv",
        shell:
            "OMP_NUM_THREADS={threads} {params.py} -m training evaluate --config {input.config} "
            "--models {input.models} --stores {params.stores} --out {output} > {log} 2>&1"
