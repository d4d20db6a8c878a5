# The report: tables and figures rebuilt from every run's tidy metrics.

EVAL_FILES = run_files("eval.jsonl")
if config["evaluation"].get("imagenet_model"):
    EVAL_FILES.append(f"{R}/runs/base_in/eval.jsonl")
TRAIN_FILES = run_files("train_metrics.jsonl")
REPORT_FILES = [f"{R}/report/report.md", f"{R}/report/report.html", f"{R}/report/metrics.csv"]


rule report:
    input:
        metrics=EVAL_FILES + TRAIN_FILES + ANALYSIS_FILES,
        saliency=rules.analysis_saliency.output.arrays,
        quality=f"{R}/intermediate/{config['evaluation']['dataset']}/segmentation_quality.jsonl",
        manifests=expand(f"{R}/datasets/{config['evaluation']['dataset']}/{{variant}}.manifest.json",
                         variant=config["datasets"][config["evaluation"]["dataset"]]["variants"]),
        stores=list(EVAL_STORES.values()),
    output:
        REPORT_FILES,
    params:
        cfg=CONFIG_JSON,
        stores=EVAL_STORE_ARGS,
        out_dir=f"{R}/report",
    conda:
        "../envs/workbench.yaml"
    log:
        f"{R}/logs/report.log",
    shell:
        "{PY} -m training report --config-json {params.cfg:q} --metrics {input.metrics} "
        "--segmentation-quality {input.quality} --manifests {input.manifests} --stores {params.stores} "
        "--saliency-arrays {input.saliency} --out-dir {params.out_dir} > {log} 2>&1"
