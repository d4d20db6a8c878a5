# ImageNet-9 Background Challenge data: source -> segmentation -> one store per variant.


rule in9_synthetic_source:
    """The embedded IN-9-like source set (only used when source.kind is synthetic)."""
    output:
        directory(f"{R}/sources/in9_synthetic"),
    params:
        ds=dataset_json("in9"),
        seed=config["seed"],
    conda:
        "../envs/workbench.yaml"
    log:
        f"{R}/logs/in9_synthetic_source.log",
    shell:
        "{PY} -m pipeline source --family in9 --dataset-json {params.ds:q} --seed {params.seed} "
        "--out {output} > {log} 2>&1"


rule in9_segment:
    """Decode, resize and segment every source image (GrabCut or U2-Net), in parallel."""
    input:
        [f"{R}/sources/in9_synthetic"] if IN9["source"]["kind"] == "synthetic" else [],
    output:
        store=directory(f"{R}/intermediate/in9/segmented.zarr"),
        quality=f"{R}/intermediate/in9/segmentation_quality.jsonl",
        manifest=f"{R}/intermediate/in9/segmented.manifest.json",
    params:
        ds=dataset_json("in9"),
        seed=config["seed"],
    threads: 32
    resources:
        mem_mb=8000,
        runtime=720,
    conda:
        "../envs/workbench.yaml"
    log:
        f"{R}/logs/in9_segment.log",
    shell:
        "{PY} -m pipeline segment --family in9 --dataset-json {params.ds:q} --seed {params.seed} "
        "--workers {threads} --out {output.store} --inputs {input} > {log} 2>&1"


rule in9_variant:
    """One Background-Challenge variant (train and val) as a zarr store, with its manifest."""
    input:
        store=rules.in9_segment.output.store,
        manifest=rules.in9_segment.output.manifest,
    output:
        store=directory(f"{R}/datasets/in9/{{variant}}.zarr"),
        manifest=f"{R}/datasets/in9/{{variant}}.manifest.json",
    params:
        ds=dataset_json("in9"),
        seed=config["seed"],
    threads: 8
    resources:
        mem_mb=4000,
        runtime=120,
    conda:
        "../envs/workbench.yaml"
    log:
        f"{R}/logs/in9_variant_{{variant}}.log",
    shell:
        "{PY} -m pipeline variant --family in9 --dataset-json {params.ds:q} --seed {params.seed} "
        "--workers {threads} --variant {wildcards.variant} --out {output.store} "
        "--inputs {input.store} {input.manifest} > {log} 2>&1"
