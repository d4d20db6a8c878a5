# The official Background Challenge test set read as released (`evaluation.official_dataset`):
# one store per variant from <root>/<variant>/val/<NN_class>/*, no segmentation of ours.


rule bg_challenge_variant:
    input:
        config=lambda wc: dataset_config_file(wc.dataset),
        folder=lambda wc: os.path.join(os.path.expanduser(config["datasets"][wc.dataset]["root"]), wc.variant, "val"),
    wildcard_constraints:
        dataset=one_of(datasets_of("bg_challenge")),
    output:
        store=directory(f"{R}/datasets/{{dataset}}/{{variant}}.zarr"),
        manifest=f"{R}/datasets/{{dataset}}/{{variant}}.manifest.json",
    params:
        py=PY,
    resources:
        **res.rule_resources(config, False, lambda wc: (30, 4000)),
    conda:
        "../envs/workbench.yaml"
    log:
        f"{R}/logs/{{dataset}}_variant_{{variant}}.log",
    shell:
        "{params.py} -m pipeline variant --family bg_challenge --config {input.config} "
        "--variant {wildcards.variant} --out {output.store} > {log} 2>&1"
