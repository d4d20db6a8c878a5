# Grids (ReBias Table 1): every method of a grid on every train variant, one job per
# (variant, seed) that trains and evaluates the grid's methods of that seed in one process (their
# networks are small, so a process start per run would cost as much as the run). Methods with
# their own `seeds` split a grid's seeds into groups, one rule each (`_2`, `_3`, ... after the first).
RUN_FILES = ("model.pt", "train_metrics.jsonl", "eval.jsonl")


for _grid_name, _grid in config.get("grids", {}).items():
    for _part, (_seeds, _keys) in enumerate(grid_seed_groups(config, _grid_name), start=1):

        rule:
            name:
                f"train_grid_{_grid_name}" + (f"_{_part}" if _part > 1 else "")
            input:
                unpack(lambda wc, g=_grid_name: {**grid_stores(g, wc.variant),
                                                 "config": grid_config_file(g, wc.variant, wc.seed)}),
            output:
                [f"{R}/runs/{grid_experiment(_grid_name, k, '{variant}')}/seed{{seed}}/{f}" for k in _keys
                 for f in RUN_FILES],
            wildcard_constraints:
                variant=one_of(_grid["train_variants"]),
                seed=one_of([str(s) for s in _seeds]),
            params:
                tests=lambda wc, g=_grid_name: store_args({k: v for k, v in grid_stores(g, wc.variant).items()
                                                           if k != "train"}),
                runs_dir=lambda wc, output: str(Path(output[0]).parents[2]),
                py=lambda wc, g=_grid_name: res.launcher(PY, res.gpus(grid_job(g, wc.variant, wc.seed)["runs"]),
                                                         THREADS),
            threads: lambda wc, g=_grid_name: THREADS * res.gpus(grid_job(g, wc.variant, wc.seed)["runs"])
            resources:
                **res.rule_resources(config, True,
                                     lambda wc, g=_grid_name: res.training(grid_job(g, wc.variant, wc.seed)["runs"]),
                                     lambda wc, g=_grid_name: res.gpus(grid_job(g, wc.variant, wc.seed)["runs"])),
            conda:
                "../envs/workbench.yaml"
            log:
                f"{R}/logs/grid_{_grid_name}_{{variant}}_seed{{seed}}.log",
            shell:
                "OMP_NUM_THREADS={threads} {params.py} -m training train-grid --config {input.config} "
                "--train-store {input.train} --stores {params.tests} --runs-dir {params.runs_dir} > {log} 2>&1"
