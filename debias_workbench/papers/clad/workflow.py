"""What CLAD's tables need from the workflow: Table 5's U2-Net runs, expanded from `analyses.u2net_model`, and
its analyses of the trained models (Tables 3 and 6, Fig. 6: their rules in analyses.smk beside this module, their
jobs, job configs and smoke counts here), collected by `workflow.paper_hooks`; the generic layers name no paper."""

from __future__ import annotations

import copy
from typing import Any

from debias_workbench.core.analysis_job import AnalysisJob

Config = dict[str, Any]

#: the methods Table 5 repeats on U2-Net masks
SEGMENTATION_COMPARED = ("clad", "clad_plus")
#: suffix of Table 5's U2-Net dataset and runs
U2NET_SUFFIX = "_u2net"
#: the table the U2-Net runs feed (`workbench plan` groups them under it)
SEGMENTATION_TABLE = "CLAD Table 5: GrabCut against U2-Net masks"


def expand_segmentation_comparison(config: Config) -> Config:
    """Table 5 (GrabCut vs U2-Net): with `analyses.u2net_model` set, the evaluation dataset is
    also built with U2-Net masks (`<dataset>_u2net`, the variants CLAD trains on) and every
    CLAD / CLAD+ experiment on it is repeated there (`<experiment>_u2net`). Evaluation stays on
    the GrabCut-built test set, so the two differ only in the training masks."""
    model = config["analyses"].get("u2net_model")
    if not model:
        return config
    out = copy.deepcopy(config)
    base = config["evaluation"]["dataset"]
    ds = copy.deepcopy(config["datasets"][base])
    ds["segmentation"].update(method="u2net", u2net_model=model)
    ds["variants"] = ["original", "only_bg_t"]
    out["datasets"][f"{base}{U2NET_SUFFIX}"] = ds
    for name, exp in config["experiments"].items():
        if exp["method"] in SEGMENTATION_COMPARED and exp["dataset"] == base:
            out["experiments"][f"{name}{U2NET_SUFFIX}"] = {
                **copy.deepcopy(exp),
                "dataset": f"{base}{U2NET_SUFFIX}",
                "label": f"{exp['label']} (U2-Net)",
            }
    return out


def segmentation_tables(config: Config) -> dict[str, str]:
    """{experiment: table} of Table 5's U2-Net runs in an expanded config (their base run is there too)."""
    return {
        name: SEGMENTATION_TABLE
        for name in config["experiments"]
        if name.endswith(U2NET_SUFFIX) and name.removesuffix(U2NET_SUFFIX) in config["experiments"]
    }


EXPANSIONS = (expand_segmentation_comparison,)
RUN_TABLES = (segmentation_tables,)


#: the rules of its analyses (the Snakefile includes them)
RULE_FILES = ("analyses.smk",)
#: the analyses of every Background Challenge run (rule `analysis`, a job per analysis), each model on the
#: ORIGINAL and MIXED_RAND stores: Table 3's feature similarity and decision consistency, Table 6's corner crops
MAIN_RUN_ANALYSES = ("consistency", "fivecrop")
#: Fig. 6's SmoothGrad maps (rule `analysis_saliency`), of the models `analyses.saliency.experiments` lists
SALIENCY = "saliency"
#: {analysis: the keys of `analyses` its job config holds}
ANALYSIS_KEYS = {"consistency": (), "fivecrop": ("fivecrop_fraction",), SALIENCY: (SALIENCY,)}
#: smoke mode's saliency counts: validation images mapped, SmoothGrad samples per map, images in the figure
SMOKE_SALIENCY = {"images": 4, "samples": 2, "figure_images": 2}


def analysis_jobs(config: Config, main_runs: list[str]) -> list[AnalysisJob]:
    """Tables 3 and 6 where the config has Background Challenge runs (two stores per model), Fig. 6 where
    `analyses.saliency.experiments` lists models (a grids-only config, config/matrix.yaml, maps none)."""
    jobs = [AnalysisJob("analysis", a, tuple(main_runs), 2, keyed=True) for a in MAIN_RUN_ANALYSES if main_runs]
    if experiments := config["analyses"][SALIENCY]["experiments"]:
        jobs.append(AnalysisJob("analysis_saliency", SALIENCY, tuple(experiments), 1))
    return jobs


def smoke_saliency(config: Config) -> None:
    """Smoke mode (`workflow.smoke`): at most `SMOKE_SALIENCY` of the saliency counts."""
    saliency = config["analyses"][SALIENCY]
    saliency.update({key: min(saliency[key], most) for key, most in SMOKE_SALIENCY.items()})


ANALYSIS_JOBS = (analysis_jobs,)
SMOKE = (smoke_saliency,)
