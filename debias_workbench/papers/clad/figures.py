"""The CLAD paper's figures: Fig. 5 (Mixed-Same against Mixed-Rand accuracy, ours beside the paper's
models), Fig. 6 (SmoothGrad saliency maps, with the share of saliency on the foreground) and Figs. 7-8
(accuracy against the lambda and queue-size sweeps, beside the shape the paper's plots show)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from debias_workbench.report.document import Document
from debias_workbench.report.helpers import mean_std, metric_table, model_order, save_figure

#: what the paper's Figs. 7 and 8 show, in words (they give no numbers)
PAPER_SHAPES = {
    "lambda": "paper: ORIGINAL flat and MIXED-RAND rising up to λ = 1, both falling for λ > 1",
    "queue_size": "paper: small queues lack negatives, large ones lose ORIGINAL accuracy; N = 32 the best trade-off",
}


def figure5(doc: Document, table, paper: dict[str, Any], path: Path, roles: dict[str, str]) -> None:
    fig, ax = plt.subplots(figsize=(8, 5))
    col = paper["columns"]
    for prow in paper["rows"]:
        same, rand = prow["values"][col.index("mixed_same")], prow["values"][col.index("mixed_rand")]
        if same is not None and rand is not None:
            ax.scatter(same, rand, marker="x", color="grey")
            if prow["type"] != "Others":  # naming every prior method makes the cluster unreadable
                ax.annotate(prow["model"], (same, rand), fontsize=6, color="grey")
    # a colour and marker per model: the demo plots 13 models, more than one colour cycle
    tab10 = plt.get_cmap("tab10").colors  # type: ignore[attr-defined]  # a ListedColormap (Colormap has no colors)
    styles = itertools.cycle(itertools.product("osD^v", tab10))
    for (marker, colour), label in zip(styles, model_order(table, roles)):
        same, rand = table[label].get("mixed_same"), table[label].get("mixed_rand")
        if same and rand:
            ax.errorbar(
                np.mean(same),
                np.mean(rand),
                xerr=np.std(same),
                yerr=np.std(rand),
                fmt=marker,
                color=colour,
                capsize=3,
                label=f"{label} (ours)",
            )
    lo = min([*ax.get_xlim(), *ax.get_ylim()])
    ax.plot([lo, 100], [lo, 100], "--", color="black", linewidth=0.8, label="identity (no background bias)")
    ax.set_xlabel("MIXED-SAME accuracy (%)")
    ax.set_ylabel("MIXED-RAND accuracy (%)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))  # beside the axes: inside it hid points
    ax.set_title("Fig. 5: MIXED-SAME vs MIXED-RAND (grey x: paper)")
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    doc.heading("Fig. 5 – MIXED-SAME vs MIXED-RAND")
    doc.image(
        path.name,
        "Models nearer the identity line have less background bias; grey crosses are the paper's "
        "models (real IN-9), dots ours (mean ± std over seeds).",
    )


def figure6(
    doc: Document,
    config: dict[str, Any],
    rows: list[dict[str, Any]],
    arrays_path: Path | None,
    out_dir: Path,
    roles: dict[str, str],
) -> None:
    doc.heading("Fig. 6 – SmoothGrad saliency")
    shares = metric_table(rows, "analysis", "saliency")
    if not shares or arrays_path is None or not Path(arrays_path).exists():
        doc.para("No saliency analysis in this run.")
        return
    arrays = np.load(arrays_path)
    images, masks = arrays["images"], arrays["masks"]
    experiments = [e for e in config["analyses"]["saliency"]["experiments"] if f"map/{e}" in arrays]
    fig, axes = plt.subplots(
        len(images),
        1 + len(experiments),
        figsize=(1.6 * (1 + len(experiments)), 1.6 * len(images) + 0.3),
        squeeze=False,
    )
    for i, image in enumerate(images):
        axes[i][0].imshow(image)
        axes[i][0].contour(masks[i], levels=[0.5], colors="white", linewidths=0.6)
        for j, exp in enumerate(experiments, start=1):
            sal = arrays[f"map/{exp}"][i]
            axes[i][j].imshow(sal / max(sal.max(), 1e-12), cmap="inferno")
            axes[i][j].contour(masks[i], levels=[0.5], colors="cyan", linewidths=0.5)
        for ax in axes[i]:
            ax.axis("off")
    axes[0][0].set_title("image (mask outline)", fontsize=7)
    for j, exp in enumerate(experiments, start=1):
        axes[0][j].set_title(config["experiments"][exp]["label"], fontsize=7)
    fig.tight_layout()
    path = out_dir / "fig6_saliency.png"
    save_figure(fig, path, dpi=120)
    doc.image(
        path.name,
        "SmoothGrad maps (gradient of the true class, first seed of each model) on the same "
        "ORIGINAL validation images; the outline is the GrabCut foreground mask.",
    )
    doc.table(
        ["Model", "Saliency inside the foreground", "Foreground area (blind-map share)"],
        [
            [label, mean_std(shares[label]["saliency_in_foreground"], 3), mean_std(shares[label]["foreground_area"], 3)]
            for label in model_order(shares, roles)
        ],
    )
    doc.para(
        "Our quantitative reading of Fig. 6 (the paper shows pictures only): the share of saliency mass on the "
        "foreground mask, averaged over the images and seeds; a map that ignored the object would score the "
        "foreground's area."
    )


def sweep_figures(
    doc: Document, config: dict[str, Any], table: dict[str, dict[str, list[float]]], out_dir: Path
) -> None:
    """Fig. 7 (lambda) and Fig. 8 (queue size): ORIGINAL and MIXED-RAND accuracy per value."""
    figure_names = {
        "lambda": ("Fig. 7", "λ (weight of the contrastive loss)"),
        "queue_size": ("Fig. 8", "queue size N (negatives per anchor)"),
    }
    for name, sweep in config.get("sweep_points", {}).items():
        number, xlabel = figure_names.get(sweep["arg"], ("Sweep", sweep["arg"]))
        doc.heading(f"{number} – {config['sweeps'][name]['experiment']}: accuracy vs {sweep['arg']}")
        values, experiments = zip(*sweep["points"])
        labels = [config["experiments"][e]["label"] for e in experiments]
        if not all(table.get(label, {}).get("original") for label in labels):
            doc.para("Some sweep runs have no evaluation in this run.")
            continue
        fig, ax = plt.subplots(figsize=(4.5, 3.2))
        for variant, colour in (("original", "tab:blue"), ("mixed_rand", "tab:orange")):
            means = [np.mean(table[label][variant]) for label in labels]
            ax.plot(values, means, "o-", color=colour, label=variant.upper().replace("_", "-"))
        if min(values) > 0:
            ax.set_xscale("log")
        ax.set_xticks(values, [f"{v:g}" for v in values])
        ax.minorticks_off()
        ax.set_xlabel(xlabel)
        ax.set_ylabel("accuracy (%)")
        ax.legend(fontsize=7)
        fig.tight_layout()
        path = out_dir / f"{number.lower().replace('. ', '').replace(' ', '_')}_{sweep['arg']}.png"
        save_figure(fig, path, dpi=120)
        seeds = sorted({len(table[label]["original"]) for label in labels})
        doc.image(
            path.name,
            f"Seeds per point: {', '.join(map(str, seeds))}. The paper gives this figure as a plot "
            "without numbers; compare the shape "
            f"({PAPER_SHAPES.get(sweep['arg'], 'not in the paper')}).",
        )
        doc.table(
            [sweep["arg"], "Original", "Mixed-Rand", "BG-GAP"],
            [
                [
                    f"{v:g}",
                    mean_std(table[label]["original"]),
                    mean_std(table[label]["mixed_rand"]),
                    mean_std(table[label].get("bg_gap", [])),
                ]
                for v, label in zip(values, labels)
            ],
        )
