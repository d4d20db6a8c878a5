# Datasets whose variants are each built whole by one job (pipeline/datasets/labelled_store.py):
# Biased MNIST (ReBias: the background's colour; one store per train rho plus the unbiased test
# store), Colored MNIST (LfF: the strokes' colour; one store per bias-conflicting percentage plus
# the unbiased test store), Waterbirds (from your CUB-200-2011 and Places folders) and BFFHQ / BAR
# (their released folders read as is), one store per percentage plus the test store.

LABELLED_DATASETS = (datasets_of("biased_mnist") + datasets_of("colored_mnist") + datasets_of("waterbirds")
                     + datasets_of("released_bias_folders"))


rule labelled_variant:
    input:
        config=lambda wc: dataset_config_file(wc.dataset),
        sources=labelled_inputs,
    wildcard_constraints:
        dataset=one_of(LABELLED_DATASETS),
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
    shell:
        "{params.py} -m pipeline variant --family {params.family} --config {input.config} "
        "--variant {wildcards.variant} --out {output.store} > {log} 2>&1"
