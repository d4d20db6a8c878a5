# Biased MNIST (ReBias Sec. 4.2): one store per train rho (train + biased test) and the
# unbiased test store, from MNIST idx files or scikit-learn's bundled digits.


rule biased_mnist_variant:
    wildcard_constraints:
        dataset=one_of(datasets_of("biased_mnist")),
    output:
        store=directory(f"{R}/datasets/{{dataset}}/{{variant}}.zarr"),
        manifest=f"{R}/datasets/{{dataset}}/{{variant}}.manifest.json",
    params:
        ds=lambda wc: dataset_json(wc.dataset),
        seed=config["seed"],
    resources:
        mem_mb=2000,
        runtime=30,
    conda:
        "../envs/workbench.yaml"
    log:
        f"{R}/logs/{{dataset}}_variant_{{variant}}.log",
    shell:
        "{PY} -m pipeline variant --family biased_mnist --dataset-json {params.ds:q} --seed {params.seed} "
        "--variant {wildcards.variant} --out {output.store} > {log} 2>&1"
