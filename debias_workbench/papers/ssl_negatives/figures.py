"""The figures of Ge et al.'s report sections: the similarity of the anchors to their positive and
negatives (Figs. 2-3, a bar chart with its table and the paper's trend beside ours) and the shape bias
against the patch negatives' alpha (Fig. 6)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from debias_workbench.core.statistics import run_value
from debias_workbench.report.document import Document
from debias_workbench.report.helpers import mean_std, save_figure

from .runs import display

#: the anchor's pairs whose similarity Figs. 2-3 show: their rows' `variant` and their names
PAIRS = {
    "positive": "positive",
    "standard_negative": "standard negative",
    "patch_negative": "patch negative",
    "texture_negative": "texture negative",
}


def similarity_table(rows: list[dict[str, Any]]) -> dict[str, dict[str, list[float]]]:
    """{experiment: {pair: [mean cosine similarity per seed]}} from the eval rows."""
    out: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in sorted(rows, key=lambda r: (r.get("experiment", ""), r.get("seed", 0))):
        if r.get("kind") == "eval" and r["metric"] == "similarity":
            out[r["experiment"]][r["variant"]].append(run_value(r))
    return out


def similarity_section(
    doc: Document,
    runs: list[dict[str, Any]],
    sims: dict[str, dict[str, list[float]]],
    paper: dict[str, dict[int, float]],
    path: Path,
    where: str = "",
    texture: str = "IN-9-Texture",
) -> None:
    """Figs. 2-3 at `path`: each run's mean cosine similarity of the anchor to its positive and negatives
    (`sims`, from `similarity_table`), its table, and how MoCo-v2's similarity to its patch and texture
    negatives moves with alpha beside the paper's (`paper`: numbers.yaml `ge_similarity`); `where` and
    `texture` name the dataset when it is not IN-9."""
    present = [r for r in runs if r["experiment"] in sims]
    if not present:
        return
    pairs = [p for p in PAIRS if any(sims[r["experiment"]].get(p) for r in present)]
    fig, ax = plt.subplots(figsize=(7, 3.8))
    width = 0.8 / len(present)
    for k, r in enumerate(present):
        means = [np.mean(sims[r["experiment"]].get(p, [np.nan])) for p in pairs]
        ax.bar(np.arange(len(pairs)) + k * width, means, width, label=display(r))
    ax.set_xticks(np.arange(len(pairs)) + 0.4 - width / 2, [PAIRS[p] for p in pairs])
    ax.set_ylabel("mean cosine similarity to the anchor")
    ax.axhline(0, color="black", linewidth=0.6)
    ax.legend(fontsize=6, frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=3)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    doc.heading(f"Similarity of the anchors to their positive and negatives (Figs. 2–3){where}")
    doc.image(
        path.name,
        "Mean cosine similarity, on the val images, between an aug-plus view's embedding and that "
        "of another view (positive), a view of another image (standard negative), its patch negative "
        f"and its {texture} image.",
    )
    doc.table(
        ["Model", *[PAIRS[p] for p in pairs]],
        [[display(r), *[mean_std(sims[r["experiment"]].get(p, []), 3) for p in pairs]] for r in present],
    )
    moco = [r for r in present if r["method"] == "moco_v2"]
    if len(moco) > 1:
        _alpha_trend(doc, moco, sims, paper)


def _alpha_trend(
    doc: Document,
    moco: list[dict[str, Any]],
    sims: dict[str, dict[str, list[float]]],
    paper: dict[str, dict[int, float]],
) -> None:
    """How the MoCo-v2 runs' mean similarity to their patch and texture negatives moves as alpha rises
    (falling monotonically or not), beside the paper's numbers at alpha = 0, 2, 3 (Figs. 2-3)."""
    alphas = [0.0 if r["negative"] == "none" else r["alpha"] for r in moco]
    order = np.argsort(alphas, kind="stable")
    lines = []
    for pair in ("patch_negative", "texture_negative"):
        values = [float(np.mean(sims[moco[i]["experiment"]].get(pair, [np.nan]))) for i in order]
        if any(np.isnan(values)):
            continue
        falls = all(b < a for a, b in zip(values, values[1:]))
        lines.append(
            f"{PAIRS[pair]}: "
            + " → ".join(f"{v:.3f}" for v in values)
            + (" (falls as α rises)" if falls else " (does not fall monotonically as α rises)")
        )
    if lines:
        doc.para(
            f"MoCo-v2 with patch negatives at α = {', '.join(f'{alphas[i]:g}' for i in order)}: "
            + "; ".join(lines)
            + ". The paper (ImageNet-100, α = 0, 2, 3): patch "
            + " → ".join(f"{v:.3f}" for v in paper["patch_negative"].values())
            + ", texture "
            + " → ".join(f"{v:.3f}" for v in paper["texture_negative"].values())
            + "."
        )


def alpha_curve_section(
    doc: Document, runs: list[dict[str, Any]], table: dict[str, dict[str, list[float]]], path: Path
) -> None:
    moco = [r for r in runs if r["method"] == "moco_v2" and r["label"] in table]
    if len(moco) < 2:
        return
    alphas = [0.0 if r["negative"] == "none" else r["alpha"] for r in moco]
    order = np.argsort(alphas, kind="stable")
    fig, ax = plt.subplots(figsize=(5, 3.2))
    for column, style in (("shape_bias", "o-"), ("original", "s--"), ("stylized", "^:")):
        ys = [table[moco[i]["label"]].get(column, []) for i in order]
        ax.errorbar(
            [alphas[i] for i in order],
            [float(np.mean(y)) if y else np.nan for y in ys],
            yerr=[float(np.std(y, ddof=1)) if len(y) > 1 else 0.0 for y in ys],
            fmt=style,
            capsize=3,
            label={
                "shape_bias": "shape bias (%)",
                "original": "Original accuracy (%)",
                "stylized": "Stylized IN-9 accuracy (%)",
            }[column],
        )
    ax.set_xlabel("α (0 = no patch negative)")
    ax.set_ylim(0, 100)
    ax.legend(fontsize=7, frameon=False)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    doc.heading("Shape bias against α (Fig. 6)")
    doc.image(
        path.name,
        "MoCo-v2 with patch negatives: shape bias on the cue-conflict images and probe accuracies, "
        "per α (mean over seeds, bars: sample std).",
    )
