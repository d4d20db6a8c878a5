"""Report sections of the CLAD supplementary's texture part (Secs. IV-V): Tables 7-9, the shape
bias (Geirhos et al. 2019) with its figure, and a picture of the stylized / texture / sketch
images beside ORIGINAL.

The reference model of the texture comparison is Base (SIN9): trained on Stylized IN-9, where a
texture says nothing about the class, it must recognise the shapes on Stylized IN-9 val before a
higher shape bias of S-CLAD can mean anything.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import zarr

from debias_workbench.core.statistics import difference
from debias_workbench.pipeline.derived_stage import work_side
from debias_workbench.report.document import Document
from debias_workbench.report.helpers import (
    MIN_IMAGES,
    capability_line,
    failed_check,
    headline,
    mean_std,
    model_order,
    save_figure,
    too_few_column,
    value_cell,
)
from debias_workbench.report.roles import played

TEXTURE_COLUMNS = ["original", "stylized", "sketch", "texture", "shape_bias"]
TEXTURE_HEADER = ["Original ↑", "Stylized IN-9 ↑", "IN-9-Sketch (stand-in) ↑", "IN-9-Texture", "Shape bias (%)"]
TEXTURE_VARIANTS = ("stylized", "texture", "sketch")
#: the column of shape-bias decision counts of the seeds that counted too few to give a value
SHAPE_BIAS_TOO_FEW = too_few_column("shape_bias")


#: the Background Challenge columns beside the texture ones (Table 9)
BG_COLUMNS, BG_HEADER = headline("in9")


def texture_sections(
    doc: Document,
    config: dict[str, Any],
    table: dict[str, dict[str, list[float]]],
    paper: dict[str, Any],
    stores: dict[str, Path],
    out_dir: Path,
    roles: dict[str, str],
    chance: float = 100 / 9,
) -> None:
    """`table`: {model label: {test set, "shape_bias" or SHAPE_BIAS_TOO_FEW: [value per seed]}}
    (the shape-bias columns as `report.aggregates.counted_table` gives them)."""
    doc.heading("Texture bias – CLAD supplementary Secs. IV–V")
    variants = config["datasets"][config["evaluation"]["dataset"]]["variants"]
    if "stylized" not in variants:
        doc.para(
            "Not run: the evaluation dataset builds no `stylized` variant. Add `stylized` (and `texture`, "
            "`sketch`) to its `variants` and give it a `stylized:` section (see config/config.yaml)."
        )
        return
    _describe(doc, config)
    _verdict(doc, table, roles, chance)
    _texture_table(
        doc,
        "Table 7 – S-CLAD / S-CLAD+ vs the baselines (%)",
        table,
        played(roles, ("base_in9", "base_sin9", "s_clad", "s_clad_plus")),
        paper["clad_table7"],
    )
    _texture_table(
        doc,
        "Table 8 – CLAD / CLAD+ on the texture test sets (%)",
        table,
        played(roles, ("base_in9", "clad", "clad_plus")),
        paper["clad_table8"],
    )
    _table9(doc, table, played(roles, ("base_in9", "s_clad", "s_clad_plus"))[0], paper["clad_table9"])
    _shape_bias_figure(doc, table, paper["geirhos_shape_bias"], out_dir / "shape_bias.png", roles)
    _image_grid(doc, stores, config, out_dir / "texture_grid.png")


def _describe(doc: Document, config: dict[str, Any]) -> None:
    ds = config["datasets"][config["evaluation"]["dataset"]]
    sty = ds["stylized"]
    styles = (
        "each class's own textures drawn by the embedded source's background generator "
        f"({sty['styles']['per_class']} per class)"
        if sty["styles"]["kind"] == "embedded"
        else f"the texture images under `{sty['styles']['root']}`, one folder per class"
    )
    text = (
        f"Stylized IN-9: every image stylized by AdaIN (α = {sty['alpha']:g}, at "
        f"{work_side(ds['image_size'], sty['work_size'])} px) with a style drawn from {styles}: of any class on "
        "train, so the texture says nothing about the label, and of another class on val, the cue-conflict set: "
        "shape of class A, texture of class B ≠ A; the shape bias counts, over the decisions for A or B, the "
        f"share for A (not shown from fewer than {MIN_IMAGES} such decisions). "
    )
    if "texture" in ds.get("variants", []):
        tex = ds["texture"]
        text += (
            f"IN-9-Texture: a texture synthesized by `{tex['tool']}` from each image's central patch and one "
            "random patch (Ge et al. 2021): no shape is left, so accuracy there measures texture use. "
        )
    text += (
        "IN-9-Sketch is not available offline (ImageNet-Sketch is a separate download): the *sketch* column is "
        "a stand-in, the edges of the segmented foreground drawn black on white, and is labelled as such."
    )
    doc.para(text)


def _verdict(doc: Document, table: dict[str, dict[str, list[float]]], roles: dict[str, str], chance: float) -> None:
    """Does S-CLAD raise the shape bias (and Stylized IN-9 accuracy) of Base (IN9)? Only after
    Base (SIN9) is shown to recognise shapes on the stylized images; a shape bias from fewer than
    `MIN_IMAGES` decisions is named, never compared."""
    reference_label, base_label = roles.get("base_sin9", ""), roles.get("base_in9", "")  # "": no such row
    reference = table.get(reference_label, {}).get("stylized", [])
    base = table.get(base_label, {})
    if not reference or not (base.get("shape_bias") or base.get(SHAPE_BIAS_TOO_FEW)):
        doc.para(
            "Capability check: no Base (SIN9) or Base (IN9) run on Stylized IN-9 in this configuration, so "
            "whether this benchmark can judge texture debiasing is unknown."
        )
        return
    task = "to recognise shapes under a foreign texture"
    capable, line = capability_line(reference_label, "on Stylized IN-9 val", reference, chance, task)
    doc.para(line)
    versus = _shape_bias_versus(doc, (reference_label, table[reference_label]), (base_label, base))
    doc.para(
        f"Shape bias of {reference_label} vs {base_label}: {versus}; "
        "Geirhos et al. found 81 vs 22 % for ResNet-50 on real images."
    )
    s_clads = [
        label
        for label in played(roles, ("s_clad", "s_clad_plus"))[0]
        if table.get(label, {}).get("shape_bias") or table.get(label, {}).get(SHAPE_BIAS_TOO_FEW)
    ]
    if not capable:
        for label in s_clads:
            doc.no_verdict(
                f"{label} vs {base_label}, shape bias", failed_check(reference_label, reference, chance, task)
            )
        doc.para(
            f"Do S-CLAD / S-CLAD+ reduce the texture bias of {base_label} here? Not informative: the reference "
            "model does not recognise shapes under a foreign texture on these images."
        )
        return
    lines = []
    for label in s_clads:
        cols = table[label]
        versus = _shape_bias_versus(doc, (label, cols), (base_label, base))
        stylized = difference(cols.get("stylized", []), base.get("stylized", []))
        doc.verdict(f"{label} vs {base_label}, Stylized IN-9 accuracy", stylized)
        lines.append(
            f"{label}: shape bias {versus}; Stylized IN-9 "
            f"{mean_std(cols.get('stylized', []))} vs {mean_std(base.get('stylized', []))} % "
            f"({stylized.text()}); Original "
            f"{mean_std(cols.get('original', []))} vs {mean_std(base.get('original', []))} %."
        )
    if lines:
        doc.para(f"Against {base_label}: " + " ".join(lines) + " Computed from the numbers, nothing is tuned to it.")


def _shape_bias_versus(
    doc: Document, ours: tuple[str, dict[str, list[float]]], base: tuple[str, dict[str, list[float]]]
) -> str:
    """ "ours vs base % (comparison)", recorded as the section's verdict (`ours`, `base`: (label,
    columns)); not compared where either side has no seed with at least `MIN_IMAGES` counted decisions."""
    (label, cols), (base_label, base_cols) = ours, base
    comparison = f"{label} vs {base_label}, shape bias"
    text = f"{value_cell(cols, 'shape_bias')} vs {value_cell(base_cols, 'shape_bias')} %"
    if cols.get("shape_bias") and base_cols.get("shape_bias"):
        judged = difference(cols["shape_bias"], base_cols["shape_bias"])
        doc.verdict(comparison, judged)
        return f"{text} ({judged.text()})"
    doc.no_verdict(comparison, f"fewer than {MIN_IMAGES} shape or texture decisions on a side")
    return f"{text} (not compared: fewer than {MIN_IMAGES} shape or texture decisions)"


def _texture_table(
    doc: Document,
    title: str,
    table: dict[str, dict[str, list[float]]],
    models: tuple[list[str], list[str]],
    paper: dict[str, Any],
) -> None:
    """`models`: (the labels of the roles some experiment plays, the papers' names of the others: `roles.played`)."""
    doc.heading(title)
    present = [m for m in models[0] if m in table]
    rows = [["Ours", m, *[value_cell(table[m], c) for c in TEXTURE_COLUMNS]] for m in present]
    cols = paper["columns"]
    for prow in paper["rows"]:
        values = dict(zip(cols, prow["values"]))
        rows.append(["Paper", prow["model"], *[f"{values[c]:.1f}" if c in values else "–" for c in TEXTURE_COLUMNS]])
    doc.table(["", "Model", *TEXTURE_HEADER], rows)
    missing = [m for m in models[0] if m not in table] + models[1]
    if missing:
        doc.para(f"No runs of {', '.join(missing)} in this configuration.")


def _table9(doc: Document, table: dict[str, dict[str, list[float]]], models: list[str], paper: dict[str, Any]) -> None:
    doc.heading("Table 9 – S-CLAD / S-CLAD+ on the Background Challenge (%)")
    present = [m for m in models if m in table]
    rows = [["Ours", m, *[mean_std(table[m].get(c, [])) for c in BG_COLUMNS]] for m in present]
    rows += [["Paper", r["model"], *[f"{v:.1f}" for v in r["values"]]] for r in paper["rows"]]
    doc.table(["", "Model", *BG_HEADER], rows)


def _shape_bias_figure(
    doc: Document,
    table: dict[str, dict[str, list[float]]],
    geirhos: dict[str, float],
    path: Path,
    roles: dict[str, str],
) -> None:
    """Shape bias per model: the figure from the seeds with at least `MIN_IMAGES` counted decisions
    only; the table beneath also lists the models whose seeds all have fewer, as too few."""
    listed = [m for m in model_order(table, roles) if table[m].get("shape_bias") or table[m].get(SHAPE_BIAS_TOO_FEW)]
    if not listed:
        return
    doc.heading("Shape bias on the cue-conflict images")
    shape_bias = {m: table[m]["shape_bias"] for m in listed if table[m].get("shape_bias")}
    if shape_bias:
        _plot_shape_bias(shape_bias, geirhos, path, roles)
        doc.image(
            path.name,
            "Bars: mean over seeds (dots: each seed) on Stylized IN-9 val; grey lines: Geirhos et "
            "al.'s ResNet-50 and human figures on real cue-conflict images, for orientation only.",
        )
    doc.table(
        ["Model", "Shape bias (%)", "Seeds"],
        [[m, value_cell(table[m], "shape_bias"), str(len(table[m].get("shape_bias", [])))] for m in listed],
    )


def _plot_shape_bias(
    shape_bias: dict[str, list[float]], geirhos: dict[str, float], path: Path, roles: dict[str, str]
) -> None:
    labels = model_order(shape_bias, roles)
    fig, ax = plt.subplots(figsize=(6.5, 0.45 * len(labels) + 1.9))
    means = [np.mean(shape_bias[m]) for m in labels]
    errs = [np.std(shape_bias[m], ddof=1) if len(shape_bias[m]) > 1 else 0.0 for m in labels]
    ax.barh(range(len(labels)), means, xerr=errs, color="tab:blue", capsize=3)
    for k, m in enumerate(labels):
        ax.plot(shape_bias[m], [k] * len(shape_bias[m]), "k.", markersize=4)
    for (name, value), style in zip(geirhos.items(), ("--", "-.", ":")):
        ax.axvline(value, color="grey", linestyle=style, linewidth=1, label=f"{name} (Geirhos et al.): {value} %")
    ax.axvline(50, color="black", linewidth=0.6)
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("shape bias (%): shape decisions / (shape + texture decisions)")
    ax.legend(fontsize=6, loc="upper center", bbox_to_anchor=(0.45, -0.18), ncol=2, frameon=False)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)


def _image_grid(doc: Document, stores: dict[str, Path], config: dict[str, Any], path: Path, n_images: int = 6) -> None:
    columns = [v for v in ("original", *TEXTURE_VARIANTS) if v in stores]
    classes = config["datasets"][config["evaluation"]["dataset"]]["classes"]
    groups = {v: zarr.open_group(str(stores[v]), mode="r")["val"] for v in columns}
    n = groups["stylized"]["labels"].shape[0] if "stylized" in groups else 0
    if not n:
        return
    # one image of each of the first classes, the same images in every column (matched by id)
    labels = groups["stylized"]["labels"][:]
    picks = [int(np.nonzero(labels == c)[0][0]) for c in np.unique(labels)[:n_images]]
    ids = groups["stylized"]["ids"][:][picks]
    fig, axes = plt.subplots(
        len(picks), len(columns), figsize=(1.5 * len(columns), 1.5 * len(picks) + 0.3), squeeze=False
    )
    for j, variant in enumerate(columns):
        where = {str(i): k for k, i in enumerate(groups[variant]["ids"][:])}
        for i, image_id in enumerate(ids):
            ax = axes[i][j]
            ax.axis("off")
            if str(image_id) in where:
                ax.imshow(groups[variant]["images"][where[str(image_id)]], interpolation="nearest")
            if variant == "stylized":
                style = int(groups["stylized"]["bias_labels"][picks[i]])
                ax.set_title(f"texture: {classes[style]}", fontsize=6)
            elif variant == "original":
                ax.set_title(classes[int(labels[picks[i]])], fontsize=6)
        axes[0][j].text(
            0.5,
            1.35,
            variant.upper() + (" (stand-in)" if variant == "sketch" else ""),
            fontsize=7,
            ha="center",
            transform=axes[0][j].transAxes,
        )
    fig.tight_layout()
    save_figure(fig, path, dpi=130)
    doc.heading("Stylized, texture and sketch images beside ORIGINAL")
    doc.image(
        path.name,
        "The same validation images in each variant; above each stylized image, the class whose "
        "texture it was given (the cue conflict).",
    )
