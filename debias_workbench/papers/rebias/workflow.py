"""What ReBias's tables need from the workflow: the grid report kind they fill (Table 1, Figs. 3-4), and Table 2's
texture-cluster analysis (its rule in analyses.smk beside this module, its job, job config and smoke counts
here); collected by `workflow.paper_hooks`, the generic layers name no paper."""

from __future__ import annotations

from typing import Any

from debias_workbench.core.analysis_job import AnalysisJob

Config = dict[str, Any]

#: `grids.<name>.report` kind of ReBias's section
GRID_REPORT_KINDS = ("rebias",)
#: Figs. 3-4 show the runs of one train variant (`figure_variant`)
FIGURE_VARIANT_KINDS = GRID_REPORT_KINDS

#: the rule of its analysis (the Snakefile includes it)
RULE_FILES = ("analyses.smk",)
#: Table 2's unbiased accuracy on texture clusters (rule `analysis_texture`), of `analyses.texture.experiments`
TEXTURE = "texture"
#: {analysis: the keys of `analyses` its job config holds}
ANALYSIS_KEYS = {TEXTURE: (TEXTURE,)}


def analysis_jobs(config: Config, main_runs: list[str]) -> list[AnalysisJob]:
    """Table 2 where `analyses.texture` lists models and names the VGG whose Gram features cluster the images
    (`vgg`, or `vgg16`): the listed models and that VGG, on the ORIGINAL store."""
    texture = config["analyses"][TEXTURE]
    if not (texture["experiments"] and (texture["vgg"] or texture.get("vgg16"))):
        return []
    return [AnalysisJob("analysis_texture", TEXTURE, tuple(texture["experiments"]), 1, extra_models=1)]


def smoke_texture(config: Config) -> None:
    """Smoke mode (`workflow.smoke`): one k-means seed, and every cluster kept however few images it holds."""
    texture = config["analyses"][TEXTURE]
    texture.update(seeds=texture["seeds"][:1], min_population=0)


ANALYSIS_JOBS = (analysis_jobs,)
SMOKE = (smoke_texture,)
