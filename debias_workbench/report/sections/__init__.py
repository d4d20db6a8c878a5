"""Registry of the report's sections, in the order they appear. A new section is one function
`render(doc, ctx)` in a module here plus one `Section` line below.

A section that tables trained models declares the model-selection rule(s) it shows
(`report.model_selection`); the report writes that rule under the section.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from debias_workbench.core.statistics import METHOD

from . import amplification, clad, datasets, rebias, runs, ssl, texture

if TYPE_CHECKING:
    from ..context import ReportContext
    from ..document import Document


@dataclass(frozen=True)
class Section:
    name: str
    render: Callable[[Document, ReportContext], None]
    selection: tuple[str, ...] = ()


def _intro(doc: Document, ctx: ReportContext) -> None:
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
    doc.para(
        f"Data source: `{ds['source']['kind']}`, {ds['image_size']}×{ds['image_size']} px, "
        f"segmentation {ds['segmentation']['method']}; backbone {config['training']['arch']}, "
        f"{config['training']['epochs']} epochs{_own_epochs(config)}; our rows are mean ± sample std over "
        f"{len(config['seeds'])} "
        f"seed(s) {config['seeds']}. Rows marked (paper) are quoted from the CLAD paper's Table 2 (ResNet-50 "
        "on real ImageNet-9): compare the *pattern*, not the values, when the data source is synthetic."
    )
    doc.para(f"Statistics: {METHOD}")


def _own_epochs(config: dict) -> str:
    """ " (Base (MR) 24, ...)": the experiments that train another number of epochs than the config's
    (a capability reference trained longer, say), so that no row's training length is left unsaid."""
    default = config["training"]["epochs"]
    own = [
        f"{exp.get('label', name)} {exp['training']['epochs']}"
        for name, exp in config["experiments"].items()
        if exp.get("training", {}).get("epochs", default) != default
    ]
    return f" ({', '.join(own)})" if own else ""


def _other_datasets(doc: Document, ctx: ReportContext) -> None:
    for dataset, d_table in ctx.other_tables.items():
        ssl.dataset_sections(
            doc, ctx.config, dataset, d_table, ctx.elsewhere[dataset], ctx.paper, ctx.out_dir, ctx.rows
        )


SECTIONS: list[Section] = [
    Section("intro", _intro),
    Section("clad_table2", lambda doc, ctx: clad.table2(doc, ctx.main, ctx.paper["clad_table2"], ctx.roles), ("last",)),
    Section("clad_bg_gap_verdict", lambda doc, ctx: clad.bg_gap_verdict(doc, ctx.main, ctx.official_table, ctx.roles)),
    Section(
        "bg_challenge_official",
        lambda doc, ctx: clad.official(
            doc, ctx.config["evaluation"].get("official_dataset"), ctx.official_table, ctx.roles
        ),
        ("last",),
    ),
    Section(
        "every_variant",
        lambda doc, ctx: clad.all_variants(doc, ctx.main, ctx.dataset["variants"], ctx.roles),
        ("last",),
    ),
    Section(
        "clad_figure5",
        lambda doc, ctx: clad.figure5(
            doc, ctx.main, ctx.paper["clad_table2"], ctx.out_dir / "fig5_mixed_same_vs_rand.png", ctx.roles
        ),
    ),
    Section("clad_table3", lambda doc, ctx: clad.table3(doc, ctx.rows, ctx.paper["clad_table3"], ctx.roles)),
    Section("clad_table4", lambda doc, ctx: clad.table4(doc, ctx.main, ctx.paper["clad_table4"], ctx.roles), ("last",)),
    Section(
        "clad_table5", lambda doc, ctx: clad.table5(doc, ctx.config, ctx.rows, ctx.paper["clad_table5"]), ("last",)
    ),
    Section(
        "clad_table6",
        lambda doc, ctx: clad.table6(
            doc, ctx.rows, ctx.paper["clad_table6"], ctx.config["analyses"]["fivecrop_fraction"], ctx.roles
        ),
    ),
    Section(
        "clad_figure6",
        lambda doc, ctx: clad.figure6(doc, ctx.config, ctx.rows, ctx.saliency_arrays, ctx.out_dir, ctx.roles),
    ),
    Section("clad_sweeps", lambda doc, ctx: clad.sweep_figures(doc, ctx.config, ctx.table, ctx.out_dir)),
    Section(
        "texture_bias",
        lambda doc, ctx: texture.texture_sections(
            doc, ctx.config, ctx.with_bias, ctx.paper, ctx.stores, ctx.out_dir, ctx.roles
        ),
        ("last",),
    ),
    Section(
        "non_semantic_negatives",
        lambda doc, ctx: ssl.ssl_sections(
            doc,
            ctx.config,
            ctx.with_bias,
            ctx.rows,
            ctx.paper,
            ctx.out_dir,
            ctx.roles,
            scored_elsewhere=ctx.scored_elsewhere,
        ),
        ("last",),
    ),
    Section("other_datasets", _other_datasets, ("last",)),
    Section("other_runs", runs.other_runs, ("last",)),
    Section(
        "rebias",
        lambda doc, ctx: rebias.rebias_sections(doc, ctx.config, ctx.all_rows, ctx.paper, ctx.out_dir),
        ("last",),
    ),
    Section(
        "park",
        lambda doc, ctx: amplification.amplification_sections(doc, ctx.config, ctx.all_rows, ctx.paper, ctx.out_dir),
        ("validation", "oracle"),
    ),
    Section(
        "variant_grid",
        lambda doc, ctx: datasets.variant_grid(
            doc, ctx.stores, ctx.config["report"]["grid_images"], ctx.out_dir / "variant_grid.png"
        ),
    ),
    Section(
        "segmentation_quality",
        lambda doc, ctx: datasets.segmentation(doc, ctx.quality_file, ctx.out_dir / "segmentation_quality.png"),
    ),
    Section(
        "manifests",
        lambda doc, ctx: datasets.manifests(
            doc, ctx.manifest_files, set(ctx.config["datasets"]) - {ctx.config["evaluation"]["dataset"]}
        ),
    ),
    Section("training", lambda doc, ctx: datasets.training(doc, ctx.rows)),
]
