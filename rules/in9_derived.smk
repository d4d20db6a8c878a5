# IN-9 variants made image by image by a model or a tool (debias_workbench/pipeline/derived_stage.py): Stylized
# IN-9 (AdaIN: a GPU job, on the CPU without one, and a CPU job where its work is under cluster.min_job_minutes:
# workbench.resources.derived_gpu), IN-9-Texture (texture synthesis through a
# command-line tool: a CPU job) and IN-9-C (ImageNet-C corruptions: CPU), in jobs of whole blocks holding the splits
# the variant builds (rules/in9_common.smk shard_jobs), then one gather into the variant
# store. Each job's config slice holds only its own variant's section, so editing the
# stylization reruns the stylized store and what reads it, nothing else.
# Uses rules/common.smk: PY, R, one_of, res; rules/in9_common.smk: derived_config_file, derived_inputs,
# shard_files, shard_images; rules/in9_data.smk: IN9_DATASETS.


for _derived, _gpu in (("stylized", True), ("texture", False), ("corrupted", False)):

    rule:
        name:
            f"in9_{_derived}_shard"
        input:
            config=derived_config_file,
            store=rules.in9_segment.output.store,
            assets=derived_inputs,
        wildcard_constraints:
            dataset=IN9_DATASETS,
            derived=_derived,
        output:
            temp(f"{R}/intermediate/{{dataset}}/{{derived}}_shards/{{shard}}.npz"),
        params:
            py=PY,
            min_images=lambda wc: res.min_job_images(config, wc.dataset, wc.derived),
        resources:
            **res.rule_resources(
                config,  # a GPU only for a stylization job of at least cluster.min_job_minutes (workbench.resources)
                (lambda wc, v=_derived: res.derived_gpu(config, wc.dataset, v, shard_images(wc, v))) if _gpu else False,
                lambda wc, v=_derived: res.derived_shard(config, wc.dataset, v, shard_images(wc, v)),
            ),
        conda:
            "../envs/workbench.yaml"
        log:
            f"{R}/logs/{{dataset}}_{{derived}}_{{shard}}.log",
        benchmark:
            f"{R}/benchmarks/in9_{_derived}_shard/{{dataset}}_{{derived}}_{{shard}}.tsv",
        shell:
            "{params.py} -m debias_workbench generate derived-shard --family in9 --config {input.config} --variant {wildcards.derived} "
            "--shard {wildcards.shard} --min-images {params.min_images} --inputs {input.store} --out {output} > {log} 2>&1"


rule in9_derived:
    """A derived variant's store and manifest (skipped items with their reasons) from its shards."""
    input:
        config=derived_config_file,
        store=rules.in9_segment.output.store,
        manifest=rules.in9_segment.output.manifest,
        shards=lambda wc: shard_files(wc, wc.derived),
    wildcard_constraints:
        dataset=IN9_DATASETS,
        derived=one_of(["stylized", "texture", "corrupted"]),
    output:
        store=directory(f"{R}/datasets/{{dataset}}/{{derived}}.zarr"),
        manifest=f"{R}/datasets/{{dataset}}/{{derived}}.manifest.json",
    params:
        py=PY,
    resources:
        **res.rule_resources(config, False, lambda wc: res.generation(config, wc.dataset)),
    conda:
        "../envs/workbench.yaml"
    log:
        f"{R}/logs/{{dataset}}_variant_{{derived}}.log",
    benchmark:
        f"{R}/benchmarks/in9_derived/{{dataset}}_variant_{{derived}}.tsv",
    shell:
        "{params.py} -m debias_workbench generate derived-gather --family in9 --config {input.config} --variant {wildcards.derived} "
        "--out {output.store} --inputs {input.store} {input.manifest} {input.shards} > {log} 2>&1"
