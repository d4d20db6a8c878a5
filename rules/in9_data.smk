# ImageNet-9 Background Challenge data: source -> segmentation -> one store per variant, for
# every dataset of the in9 family (`in9`; `in9_u2net` when Table 5's U2-Net run is configured).

IN9_DATASETS = one_of(datasets_of("in9"))


def ds_json(wildcards):
    return dataset_json(wildcards.dataset)


def segment_inputs(wildcards):
    if config["datasets"][wildcards.dataset]["source"]["kind"] == "synthetic":
        return [f"{R}/sources/{wildcards.dataset}_synthetic"]
    return []


rule in9_synthetic_source:
    """The embedded IN-9-like source set (only used when source.kind is synthetic)."""
    wildcard_constraints:
        dataset=IN9_DATASETS,
    output:
        directory(f"{R}/sources/{{dataset}}_synthetic"),
    params:
        ds=ds_json,
        seed=config["seed"],
    conda:
        "../envs/workbench.yaml"
    log:
        f"{R}/logs/{{dataset}}_synthetic_source.log",
    shell:
        "{PY} -m pipeline source --family in9 --dataset-json {params.ds:q} --seed {params.seed} "
        "--out {output} > {log} 2>&1"


rule in9_segment:
    """Decode, resize and segment every source image (GrabCut or U2-Net), in parallel."""
    input:
        segment_inputs,
    wildcard_constraints:
        dataset=IN9_DATASETS,
    output:
        store=directory(f"{R}/intermediate/{{dataset}}/segmented.zarr"),
        quality=f"{R}/intermediate/{{dataset}}/segmentation_quality.jsonl",
        manifest=f"{R}/intermediate/{{dataset}}/segmented.manifest.json",
    params:
        ds=ds_json,
        seed=config["seed"],
    threads: 32
    resources:
        mem_mb=8000,
        runtime=720,
    conda:
        "../envs/workbench.yaml"
    log:
        f"{R}/logs/{{dataset}}_segment.log",
    shell:
        "{PY} -m pipeline segment --family in9 --dataset-json {params.ds:q} --seed {params.seed} "
        "--workers {threads} --out {output.store} --inputs {input} > {log} 2>&1"


rule in9_variant:
    """One Background-Challenge variant (train and val) as a zarr store, with its manifest."""
    input:
        store=rules.in9_segment.output.store,
        manifest=rules.in9_segment.output.manifest,
    wildcard_constraints:
        dataset=IN9_DATASETS,
    output:
        store=directory(f"{R}/datasets/{{dataset}}/{{variant}}.zarr"),
        manifest=f"{R}/datasets/{{dataset}}/{{variant}}.manifest.json",
    params:
        ds=ds_json,
        seed=config["seed"],
    threads: 8
    resources:
        mem_mb=4000,
        runtime=120,
    conda:
        "../envs/workbench.yaml"
    log:
        f"{R}/logs/{{dataset}}_variant_{{variant}}.log",
    shell:
        "{PY} -m pipeline variant --family in9 --dataset-json {params.ds:q} --seed {params.seed} "
        "--workers {threads} --variant {wildcards.variant} --out {output.store} "
        "--inputs {input.store} {input.manifest} > {log} 2>&1"
