# Every training run, declared alone or by a grid, is one kind of run: trained by a `train` job and
# scored on the test sets its dataset family declares by an `evaluate` job. A pack (`PACKS`,
# workbench.config.packs) is only how many runs share a training job's process: one run per job for
# the runs declared alone (rule `train`, one job per experiment and seed: its pack, `ALONE`, found from the
# wildcards), a grid's small runs of one train variant and seed together (rules `train_<grid>`, `_2`, `_3`,
# ... where seed groups or `pack` split them). A run resumes from its checkpoint after a kill, and only from
# a checkpoint made with the same run config; on a cluster, a run longer than a job (cluster.max_job_hours)
# stops before its job's time runs out and the rule's retry (training_minutes) continues it from that
# checkpoint. Scoring packs (`SCORING_PACKS`, workbench.config.scoring_packs) score every seed of one
# experiment (rules `evaluate`, `evaluate_2`, ... by seed list), or of one grid pack on one train variant
# (`evaluate_<grid>`), in one process, the official Background Challenge images too.
#
# Why a rule per grid pack and per seed list, not one rule with a pack wildcard: a job writes every file
# of its pack's runs, at the runs' own paths (runs/<experiment>/seed<seed>/...), and Snakemake 9 wants the
# same wildcards in every output, log and benchmark of a rule, from a fixed list of output patterns. A grid
# pack's outputs are its members' fixed experiment names (`<grid>_<method>_{variant}`, as many as the pack
# has), and a scoring pack's its fixed seeds (`seed0`, `seed1`, ...; the official scores or not): no
# wildcard can stand for a member, so each distinct list of outputs needs its own rule. Every such rule
# is one of these two loops, with the same body as `train` (the helpers of rules/common.smk, given the pack).
# Uses rules/common.smk: ALONE, OFFICIAL_STORES, PACKS, PY, R, SCORING_PACKS, THREADS, alone, named_inputs_args,
# one_of, pack_scored, scoring_inputs, scoring_resources, small_job_group, small_job_resources, store_args, test_stores,
# train_inputs, train_launcher, train_resources, train_threads.


rule train:
    """One run declared alone (or by a sweep): one job per experiment and seed."""
    input:
        unpack(alone(train_inputs)),
    output:
        f"{R}/runs/{{experiment}}/seed{{seed}}/model.pt",
        f"{R}/runs/{{experiment}}/seed{{seed}}/train_metrics.jsonl",
    wildcard_constraints:
        experiment=one_of(ALONE.constraints["experiment"]),
    params:
        aligned=lambda wc, input: named_inputs_args(input),
        tests=lambda wc, input: named_inputs_args(input, "test_"),
        py=alone(train_launcher),
    threads: alone(train_threads)
    resources:
        **train_resources(ALONE),
    conda:
        "../envs/workbench.yaml"
    log:
        f"{R}/logs/train_{{experiment}}_seed{{seed}}.log",
    benchmark:
        f"{R}/benchmarks/train/train_{{experiment}}_seed{{seed}}.tsv",
    shell:
        "OMP_NUM_THREADS={threads} {params.py} -m debias_workbench train --config {input.config} --train-store {input.store} "
        f"--runs-dir {R}/runs --aligned-stores {{params.aligned}} --test-stores {{params.tests}} > {{log}} 2>&1"


for _pack in PACKS[1:]:  # a grid's packs: `train` with the pack's members as outputs (see above)
    _runs = _pack.members  # experiment-name patterns of one job, `<grid>_<method>_{variant}`
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
            py=lambda wc, p=_pack: train_launcher(p, wc),
        threads: lambda wc, p=_pack: train_threads(p, wc)
        resources:
            **train_resources(_pack),
        conda:
            "../envs/workbench.yaml"
        log:
            f"{R}/logs/train{_pack.name}_{_tag}_seed{{seed}}.log",
        benchmark:
            f"{R}/benchmarks/train{_pack.name}/train{_pack.name}_{_tag}_seed{{seed}}.tsv",
        shell:
            "OMP_NUM_THREADS={threads} {params.py} -m debias_workbench train --config {input.config} --train-store {input.store} "
            f"--runs-dir {R}/runs --aligned-stores {{params.aligned}} --test-stores {{params.tests}} > {{log}} 2>&1"


for _pack in SCORING_PACKS:  # one rule per list of outputs (see above)
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
        group: small_job_group(f"evaluate{_pack.name}", lambda wc, w=_wildcard: getattr(wc, w))
        resources:
            **small_job_resources(f"evaluate{_pack.name}", lambda wc, w=_wildcard: getattr(wc, w),
                                  scoring_resources(_pack)),
        conda:
            "../envs/workbench.yaml"
        log:
            f"{R}/logs/evaluate{_pack.name}_{{{_wildcard}}}.log",
        benchmark:
            f"{R}/benchmarks/evaluate{_pack.name}/evaluate{_pack.name}_{{{_wildcard}}}.tsv",
        shell:
            "OMP_NUM_THREADS={threads} {params.py} -m debias_workbench evaluate --config {input.config} "
            "--models {input.models} --stores {params.stores} --out {output.scores} {params.official} > {log} 2>&1"
