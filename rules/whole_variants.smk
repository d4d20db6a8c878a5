# Datasets whose families build each variant store whole in one job (`DatasetFamily.whole_variants`):
# Biased MNIST, Colored MNIST, Waterbirds, BFFHQ / BAR (released folders) and the official Background
# Challenge test images. Each job reads the files its family declares (`input_paths`: MNIST idx
# files, the CUB / Places folders, the released folders), so a missing one stops the workflow at
# start, named. The in9 family has stages of its own (rules/in9_data.smk, rules/in9_derived.smk).
# Uses rules/common.smk: PY, R, dataset_config_file, dataset_family, get_family, one_of, res.

WHOLE_VARIANT_DATASETS = [d for d in config["datasets"] if get_family(dataset_family(config, d)).whole_variants]


rule dataset_variant:
    input:
        config=lambda wc: dataset_config_file(wc.dataset),
        sources=lambda wc: get_family(dataset_family(config, wc.dataset)).input_paths(config["datasets"][wc.dataset],
                                                                                      wc.variant),
    wildcard_constraints:
        dataset=one_of(WHOLE_VARIANT_DATASETS),
    output:
        store=directory(f"{R}/datasets/{{dataset}}/{{variant}}.zarr"),
        manifest=f"{R}/datasets/{{dataset}}/{{variant}}.manifest.json",
    params:
        py=PY,
        family=lambda wc: dataset_family(config, wc.dataset),
    resources:
        **res.rule_resources(config, False, lambda wc: res.generation(config, wc.dataset)),
    conda:
        "../envs/workbench.yaml"
    log:
        f"{R}/logs/{{dataset}}_variant_{{variant}}.log",
    benchmark:
        f"{R}/benchmarks/dataset_variant/{{dataset}}_variant_{{variant}}.tsv",
    shell:
        "{params.py} -m debias_workbench generate variant --family {params.family} --config {input.config} "
        "--variant {wildcards.variant} --out {output.store} > {log} 2>&1"
