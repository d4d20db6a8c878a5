# Every training run, declared alone or by a grid, is one kind of run: trained by a `train` job and
# scored on the test sets its dataset family declares by an `evaluate` job. A pack (`PACKS`,
# workbench.config.packs) is only how many runs share a training job's process: one run per job for
# the runs declared alone (rule `train`, one job per experiment and seed), a grid's small runs of one
# train variant and seed together (rules `train_<grid>`, `_2`, `_3`, ... where seed groups or `pack`
# split them). A run resumes from its checkpoint after a kill, and only from a checkpoint made with
# the same run config; on a cluster, a run longer than a job (cluster.max_job_hours) stops before its
# job's time runs out and the rule's retry (train_retries) continues it from that checkpoint. Scoring
# packs (`SCORING_PACKS`, workbench.config.scoring_packs) score every seed of one experiment (rules
# `evaluate`, `evaluate_2`, ... by seed list), or of one grid pack on one train variant
# (`evaluate_<grid>`), in one process, the official Background Challenge images too.
# Uses rules/common.smk: OFFICIAL_STORES, PACKS, PY, R, RUNS_PER_GPU, SCORING_PACKS, THREADS, named_inputs_args,
# one_of, pack_runs, pack_scored, res, scoring_inputs, store_args, test_stores, train_inputs, train_retries.

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
        retries: train_retries(_pack)  # on a cluster: a run longer than cluster.max_job_hours continues in the next job
        resources:
            **res.rule_resources(config, True, lambda wc, p=_pack: res.training(pack_runs(p, wc), RUNS_PER_GPU),
                                 lambda wc, p=_pack: res.gpus(pack_runs(p, wc))),
        conda:
            "../envs/workbench.yaml"
        log:
            f"{R}/logs/train{_pack.name}_{_tag}_seed{{seed}}.log",
        benchmark:
            f"{R}/benchmarks/train{_pack.name}/train{_pack.name}_{_tag}_seed{{seed}}.tsv",
        shell:
            "OMP_NUM_THREADS={threads} {params.py} -m debias_workbench train --config {input.config} --train-store {input.store} "
            f"--runs-dir {R}/runs --aligned-stores {{params.aligned}} --test-stores {{params.tests}} > {{log}} 2>&1"


for _pack in SCORING_PACKS:
    _wildcard = next(iter(_pack.constraints))  # experiment, or a grid's train variant
    _models = [f"{R}/runs/{m}/seed{s}/model.pt" for m in _pack.members for s in _pack.seeds]
    _outputs = [f"{R}/runs/{m}/seed{s}/eval.jsonl" for m in _pack.members for s in _pack.seeds]
    _official = [f"{R}/runs/{m}/seed{s}/eval_official.jsonl" for m in _pack.members for s in _pack.seeds]

    rule:
        name:
            f"evaluate{_pack.name}"
        input:
            unpack(lambda wc, p=_pack: scoring_inputs(p, wc)),
            models=_models,
        output:
            scores=_outputs,
            official=_official if _pack.official else [],
        wildcard_constraints:
            **{w: one_of(v) for w, v in _pack.constraints.items()},
        params:
            stores=lambda wc, p=_pack: store_args(test_stores(pack_scored(p, wc))),
            official=lambda wc, input, output: (f"--official-config {input.official_config} --official-stores "
                                                f"{store_args(OFFICIAL_STORES)} --official-out {output.official}"
                                                if output.official else ""),
            py=PY,
        threads: THREADS
        resources:
            **res.rule_resources(config, True, lambda wc, p=_pack: res.evaluation(
                config, len(test_stores(pack_scored(p, wc))) + len(OFFICIAL_STORES) * p.official,
                len(p.members) * len(p.seeds), scoring(config, pack_scored(p, wc))[0])),
        conda:
            "../envs/workbench.yaml"
        log:
            f"{R}/logs/evaluate{_pack.name}_{{{_wildcard}}}.log",
        benchmark:
            f"{R}/benchmarks/evaluate{_pack.name}/evaluate{_pack.name}_{{{_wildcard}}}.tsv",
        shell:
            "OMP_NUM_THREADS={threads} {params.py} -m debias_workbench evaluate --config {input.config} "
            "--models {input.models} --stores {params.stores} --out {output.scores} {params.official} > {log} 2>&1"
