# The report: tables and figures rebuilt from every run's tidy metrics.
# Uses rules/common.smk: ANALYSIS_FILES, EVAL_DATASET, JOB_CONFIGS, MAIN_EXPERIMENTS, OFFICIAL, PROVENANCE, PY, R,
# REPORT_ARRAYS, dataset_variants, res, run_files; rules/evaluate.smk: EVAL_STORES, EVAL_STORE_ARGS.

EVAL_FILES = run_files("eval.jsonl")
if config["evaluation"].get("imagenet_model"):
    EVAL_FILES.append(f"{R}/runs/base_in/eval.jsonl")
if OFFICIAL:
    EVAL_FILES += run_files("eval_official.jsonl", MAIN_EXPERIMENTS)
TRAIN_FILES = run_files("train_metrics.jsonl")
REPORT_FILES = [f"{R}/report/report.md", f"{R}/report/report.html", f"{R}/report/metrics.csv"]
# the manifests of the other datasets runs are scored on (ImageNet-100, the grids' datasets)
OTHER_EVAL_DATASETS = sorted({scoring(config, e)[0] for e in config["experiments"]} - {EVAL_DATASET})


rule report:
    input:
        config=JOB_CONFIGS.path("report", report_config(config, PROVENANCE), keep_order=True),
        metrics=EVAL_FILES + TRAIN_FILES + ANALYSIS_FILES,
        **{name: path for name, (_option, path) in REPORT_ARRAYS.items()},  # the papers' analyses' arrays
        quality=f"{R}/intermediate/{EVAL_DATASET}/segmentation_quality.jsonl",
        manifests=[f"{R}/datasets/{d}/{v}.manifest.json" for d in [EVAL_DATASET, *OTHER_EVAL_DATASETS]
                   for v in dataset_variants(config, d)],
        stores=list(EVAL_STORES.values()),
    output:
        REPORT_FILES,
    params:
        stores=EVAL_STORE_ARGS,
        out_dir=lambda wc, output: os.path.dirname(output[0]),
        arrays=lambda wc, input: " ".join(f"{option} {getattr(input, name)}" for name, (option, _p) in REPORT_ARRAYS.items()),
        py=PY,
    resources:
        **res.rule_resources(config, False, lambda wc: (30, 4000)),
    conda:
        "../envs/workbench.yaml"
    log:
        f"{R}/logs/report.log",
    benchmark:
        f"{R}/benchmarks/report/report.tsv",
    shell:
        "{params.py} -m debias_workbench report --config {input.config} --metrics {input.metrics} "
        "--segmentation-quality {input.quality} --manifests {input.manifests} --stores {params.stores} "
        "{params.arrays} --out-dir {params.out_dir} > {log} 2>&1"
