# ImageNet-9 Background Challenge data, for every dataset of the in9 family (`in9`; `in9_u2net`
# when Table 5's U2-Net run is configured; `imagenet100`): source -> listing -> segmentation jobs of whole blocks
# of `block_images` images (rules/in9_common.smk shard_jobs) -> gathered intermediate store -> one store per
# variant; and the `external` test sets (ImageNet-Sketch, ImageNet-R) read from the user's folders.
# Uses rules/common.smk: PY, R, dataset_config_file, datasets_of, external_folder, folder_fingerprint,
# one_of, res, source_paths, user_folders_fingerprint, variants; rules/in9_common.smk: shard_files, shard_images.
IN9_DATASETS = one_of(datasets_of("in9"))
# the variants composed from the segmented store's arrays, the background-biased ones included
ARRAY_VARIANTS = list(variants.VARIANTS) + [
    v for d in datasets_of("in9") for v in variants.bg_conflict_variants(config["datasets"][d].get("bg_conflict_percents", []))]


rule in9_synthetic_source:
    """The embedded IN-9-like source set (only used when source.kind is synthetic)."""
    input:
        config=lambda wc: dataset_config_file(wc.dataset),
    wildcard_constraints:
        dataset=IN9_DATASETS,
    output:
        directory(f"{R}/sources/{{dataset}}_synthetic"),
    params:
        py=PY,
    resources:
        **res.rule_resources(config, False, lambda wc: res.generation(config, wc.dataset)),
    conda:
        "../envs/workbench.yaml"
    log:
        f"{R}/logs/{{dataset}}_synthetic_source.log",
    benchmark:
        f"{R}/benchmarks/in9_synthetic_source/{{dataset}}_synthetic_source.tsv",
    shell:
        "{params.py} -m debias_workbench generate source --family in9 --config {input.config} --out {output} > {log} 2>&1"


checkpoint in9_list:
    """Every source item in id order (broken links and unreadable entries included, to be
    skipped with their reason): which item is in which shard."""
    input:
        config=lambda wc: dataset_config_file(wc.dataset),
        source=lambda wc: source_paths(wc.dataset),
    wildcard_constraints:
        dataset=IN9_DATASETS,
    output:
        listing=f"{R}/intermediate/{{dataset}}/listing.json",
    params:
        fingerprint=user_folders_fingerprint,
        synthetic=lambda wc, input: input.source if config["datasets"][wc.dataset]["source"]["kind"] == "synthetic" else "",
        py=PY,
    resources:
        **res.rule_resources(config, False, lambda wc: res.generation(config, wc.dataset)),
    conda:
        "../envs/workbench.yaml"
    log:
        f"{R}/logs/{{dataset}}_list.log",
    benchmark:
        f"{R}/benchmarks/in9_list/{{dataset}}_list.tsv",
    shell:
        "{params.py} -m debias_workbench generate list --family in9 --config {input.config} --out {output.listing} "
        "--inputs {params.synthetic} > {log} 2>&1"


rule in9_segment_shard:
    """Decode, resize and segment (GrabCut or U2-Net) the images of one job's whole blocks."""
    input:
        config=lambda wc: dataset_config_file(wc.dataset),
        listing=rules.in9_list.output.listing,
    wildcard_constraints:
        dataset=IN9_DATASETS,
    output:
        temp(f"{R}/intermediate/{{dataset}}/shards/{{shard}}.npz"),
    params:
        py=PY,
        min_images=lambda wc: res.min_job_images(config, wc.dataset, "segment"),
    resources:
        **res.rule_resources(config, False, lambda wc: res.segment_shard(config, wc.dataset, shard_images(wc, "segment"))),
    conda:
        "../envs/workbench.yaml"
    log:
        f"{R}/logs/{{dataset}}_segment_{{shard}}.log",
    benchmark:
        f"{R}/benchmarks/in9_segment_shard/{{dataset}}_segment_{{shard}}.tsv",
    shell:
        "{params.py} -m debias_workbench generate segment-shard --family in9 --config {input.config} --shard {wildcards.shard} "
        "--min-images {params.min_images} "
        "--inputs {input.listing} --out {output} > {log} 2>&1"


rule in9_segment:
    """The intermediate store, quality records and manifest of skipped items, from every shard."""
    input:
        config=lambda wc: dataset_config_file(wc.dataset),
        listing=rules.in9_list.output.listing,
        shards=shard_files,
    wildcard_constraints:
        dataset=IN9_DATASETS,
    output:
        store=directory(f"{R}/intermediate/{{dataset}}/segmented.zarr"),
        quality=f"{R}/intermediate/{{dataset}}/segmentation_quality.jsonl",
        manifest=f"{R}/intermediate/{{dataset}}/segmented.manifest.json",
    params:
        py=PY,
    resources:
        **res.rule_resources(config, False, lambda wc: res.generation(config, wc.dataset)),
    conda:
        "../envs/workbench.yaml"
    log:
        f"{R}/logs/{{dataset}}_segment.log",
    benchmark:
        f"{R}/benchmarks/in9_segment/{{dataset}}_segment.tsv",
    shell:
        "{params.py} -m debias_workbench generate segment-gather --family in9 --config {input.config} --out {output.store} "
        "--inputs {input.listing} {input.shards} > {log} 2>&1"


rule in9_variant:
    """One Background-Challenge variant (or the sketch stand-in), train and val, as a zarr store
    with its manifest; the stylized and texture variants are rules/in9_derived.smk's."""
    input:
        config=lambda wc: dataset_config_file(wc.dataset),
        store=rules.in9_segment.output.store,
        manifest=rules.in9_segment.output.manifest,
    wildcard_constraints:
        dataset=IN9_DATASETS,
        variant=one_of(ARRAY_VARIANTS),
    output:
        store=directory(f"{R}/datasets/{{dataset}}/{{variant}}.zarr"),
        manifest=f"{R}/datasets/{{dataset}}/{{variant}}.manifest.json",
    params:
        py=PY,
    threads: lambda wc: res.variant_threads(config, wc.dataset)
    resources:
        **res.rule_resources(config, False, lambda wc: res.generation(config, wc.dataset)),
    conda:
        "../envs/workbench.yaml"
    log:
        f"{R}/logs/{{dataset}}_variant_{{variant}}.log",
    benchmark:
        f"{R}/benchmarks/in9_variant/{{dataset}}_variant_{{variant}}.tsv",
    shell:
        "{params.py} -m debias_workbench generate variant --family in9 --config {input.config} --workers {threads} "
        "--variant {wildcards.variant} --out {output.store} --inputs {input.store} {input.manifest} > {log} 2>&1"


rule in9_external:
    """ImageNet-Sketch or ImageNet-R (`external`), read as released: the images of the dataset's
    classes (by wnid) resized to its image size, val split only; other classes counted."""
    input:
        config=lambda wc: dataset_config_file(wc.dataset),
        folder=external_folder,
    wildcard_constraints:
        dataset=IN9_DATASETS,
        variant=one_of(variants.EXTERNAL),
    output:
        store=directory(f"{R}/datasets/{{dataset}}/{{variant}}.zarr"),
        manifest=f"{R}/datasets/{{dataset}}/{{variant}}.manifest.json",
    params:
        fingerprint=lambda wc: folder_fingerprint([external_folder(wc)]),
        py=PY,
    resources:
        **res.rule_resources(config, False, lambda wc: res.generation(config, wc.dataset)),
    conda:
        "../envs/workbench.yaml"
    log:
        f"{R}/logs/{{dataset}}_variant_{{variant}}.log",
    benchmark:
        f"{R}/benchmarks/in9_external/{{dataset}}_variant_{{variant}}.tsv",
    shell:
        "{params.py} -m debias_workbench generate variant --family in9 --config {input.config} --variant {wildcards.variant} "
        "--out {output.store} --inputs {input.folder} > {log} 2>&1"
