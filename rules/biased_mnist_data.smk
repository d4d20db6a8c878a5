# Biased MNIST (ReBias Sec. 4.2): one store per train rho (train + biased test) and the
# unbiased test store, from MNIST idx files or scikit-learn's bundled digits.


rule biased_mnist_variant:
    input:
        config=lambda wc: dataset_config_file(wc.dataset),
        idx=lambda wc: idx_files(wc.dataset),
    wildcard_constraints:
        dataset=one_of(datasets_of("biased_mnist")),
    output:
        store=directory(f"{R}/datasets/{{dataset}}/{{variant}}.zarr"),
        manifest=f"{R}/datasets/{{dataset}}/{{variant}}.manifest.json",
    params:
        py=PY,
    resources:
        **res.rule_resources(config, False, lambda wc: res.generation(config, wc.dataset)),
    conda:
        "../envs/workbench.yaml"
    log:
        f"{R}/logs/{{dataset}}_variant_{{variant}}.log",
    shell:
        "{params.py} -m pipeline variant --family biased_mnist --config {input.config} "
        "--variant {wildcards.variant} --out {output.store} > {log} 2>&1"
