"""The report's introduction: the config it was built from, the data source and training, the seeds,
what each paper's quoted rows are (`Paper.intro`) and the statistics' method."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from debias_workbench.core.statistics import METHOD
from debias_workbench.papers import PAPERS

from ..section import has_main_runs

if TYPE_CHECKING:
    from ..context import ReportContext
    from ..document import Document


def intro(doc: Document, ctx: ReportContext) -> None:
    config, ds = ctx.config, ctx.dataset
    if config.get("smoke"):
        doc.para(
            "**Smoke run** (`smoke: true`, debias_workbench/workflow/smoke.py): every configured run at its real "
            "shapes with "
            "counts shrunk to a few images, one seed and one short epoch. It shows that the workflow runs; "
            "its numbers are not results. The capability checks and verdicts below are computed as in a "
            "real run; resting on a handful of images and one seed, they say \"cannot tell\"."
        )
    source = config["provenance"]
    overrides = " ".join(f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in source["overrides"].items())
    doc.para(
        f"Built from the config {' + '.join(f'`{f}`' for f in source['files'])}"
        + (f" with `--config {overrides}`" if overrides else "")
        + f" (later files override earlier ones); resolved config SHA-256 `{source['sha256'][:16]}`."
    )
    if not has_main_runs(config):
        doc.para(
            "Every run belongs to a grid: its dataset and training recipe are the config's `grids.<name>`; rows are "
            "mean ± sample std over each grid's seeds."
        )
        doc.para(f"Statistics: {METHOD}")
        return
    doc.para(
        f"Data source: `{ds['source']['kind']}`, {ds['image_size']}×{ds['image_size']} px, "
        f"segmentation {ds['segmentation']['method']}; backbone {config['training']['arch']}, "
        f"{config['training']['epochs']} epochs{own_epochs(config)}; our rows are mean ± sample std over "
        f"{len(config['seeds'])} "
        f"seed(s) {config['seeds']}." + "".join(f" {PAPERS[name].intro}" for name in PAPERS if PAPERS[name].intro)
    )
    doc.para(f"Statistics: {METHOD}")


def own_epochs(config: dict) -> str:
    """ " (Base (MR) 24, ...)": the experiments that train another number of epochs than the config's
    (a capability reference trained longer, say), so that no row's training length is left unsaid."""
    default = config["training"]["epochs"]
    own = [
        f"{exp.get('label', name)} {exp['training']['epochs']}"
        for name, exp in config["experiments"].items()
        if exp.get("training", {}).get("epochs", default) != default
    ]
    return f" ({', '.join(own)})" if own else ""
