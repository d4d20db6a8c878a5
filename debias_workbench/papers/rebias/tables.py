"""Report sections of ReBias (Bahng et al., ICML 2020) for every grid of the config: Table 1
(biased and unbiased accuracy per train variant and method), a verdict on ReBias vs Vanilla
computed from the numbers, Fig. 3 (accuracy per bias x class cell) and Fig. 4 (learning
curves: unbiased accuracy and HSIC over training)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from debias_workbench.core.statistics import Interval, difference
from debias_workbench.report.aggregates import grid_accuracies
from debias_workbench.report.document import Document
from debias_workbench.report.helpers import capability_line, failed_check, mean_std, save_figure

TEST_SETS = ("biased", "unbiased")
CHANCE = 10.0  # ten digits, colours independent of them in the unbiased test set


def _rho(variant: str) -> str:
    """The paper's row name of a Biased MNIST variant (`rho_0.997` -> `0.997`)."""
    return variant.removeprefix("rho_")


def _variant_order(variants: list[str]) -> list[str]:
    """Strongest bias first, as the paper's tables."""
    try:
        return sorted(variants, key=lambda v: -float(_rho(v)))
    except ValueError:
        return list(variants)


def rebias_sections(
    doc: Document, config: dict[str, Any], rows: list[dict[str, Any]], paper: dict[str, Any], out_dir: Path
) -> None:
    """Every ReBias grid's Table 1, verdict and Figs. 3-4, then Table 2 (images)."""
    for name, grid in config.get("grids", {}).items():
        if grid.get("report", "rebias") != "rebias":
            continue
        acc = grid_accuracies(rows, name)
        table1(doc, name, grid, acc, paper)
        verdict(doc, grid, acc)
        figure3(doc, name, grid, rows, out_dir / f"fig3_{name}_cells.png")
        figure4(doc, name, grid, config, rows, out_dir / f"fig4_{name}_curves.png")
    table2(doc, config, rows, paper["rebias_table2"])


def table1(doc: Document, name: str, grid: dict[str, Any], acc, paper: dict[str, Any]) -> None:
    keys, labels = list(grid["methods"]), [m["label"] for m in grid["methods"].values()]
    variants = _variant_order(grid["train_variants"])
    n_seeds = len(grid.get("seeds", [])) or max((len(v) for v in acc.values()), default=0)
    doc.heading(f"Table 1 – {name}: biased and unbiased accuracy (%) on {grid['dataset']}")
    doc.para(
        f"Mean ± sample std over {n_seeds} seed(s); each row is one train variant (colour-digit correlation "
        "ρ). *Biased*: every test digit in its own colour (ρ = 1, as the authors score it); *unbiased*: colours "
        "independent of the digit (ρ = 0.1 over 10 colours). Rows marked (paper) are ReBias's Table 1 (60,000 "
        "MNIST digits, 80 epochs, paper widths), at the paper's ρ: with fewer digits and epochs the transition "
        "from shape to colour comes at lower ρ, so compare the pattern across ρ, not the values at one ρ."
    )
    for test_set in TEST_SETS:
        table_rows = [[f"ρ = {_rho(v)}", *[mean_std(acc.get((v, k, test_set), [])) for k in keys]] for v in variants]
        means = [[np.mean(acc[(v, k, test_set)]) for v in variants if acc.get((v, k, test_set))] for k in keys]
        table_rows.append(["avg.", *[f"{np.mean(m):.1f}" if m else "–" for m in means]])
        # every row of the paper's table, also where the demo trains at other ρ: side by side
        quoted = paper["rebias_table1"]
        for rho, values in quoted[test_set].items():
            col = {k: values[i] for i, k in enumerate(quoted["columns"])}
            table_rows.append([f"ρ = {rho} (paper)", *[f"{col[k]:.1f}" if k in col else "–" for k in keys]])
        doc.para(f"**{test_set.capitalize()} accuracy**")
        doc.table(["Train ρ", *labels], table_rows)


def verdict(doc: Document, grid: dict[str, Any], acc) -> None:
    """Says plainly whether Vanilla relies on the bias and whether ReBias beats Vanilla on
    unbiased accuracy; a difference counts only where its 95 % confidence interval (`core.statistics.difference`)
    excludes zero."""
    keys = {spec["method"]: key for key, spec in grid["methods"].items()}
    vanilla, rebias = keys.get("vanilla"), keys.get("rebias")
    variants = _variant_order(grid["train_variants"])
    capable, reason, lines = _vanilla_findings(acc, vanilla, variants) if vanilla else (None, "", [])
    compared = [
        v
        for v in variants
        if vanilla and rebias and acc.get((v, rebias, "unbiased")) and acc.get((v, vanilla, "unbiased"))
    ]
    versus = "ReBias vs Vanilla, unbiased accuracy, ρ = "  # as the verdict's sentence names them
    if vanilla and rebias and capable is False:
        for v in compared:
            doc.no_verdict(versus + _rho(v), reason)
        lines.append(
            "Does ReBias beat Vanilla on unbiased accuracy in this run? Not informative (see the capability check)."
        )
    elif vanilla and rebias:
        outcome = {v: difference(acc[(v, rebias, "unbiased")], acc[(v, vanilla, "unbiased")]) for v in compared}
        for v, judged in outcome.items():
            doc.verdict(versus + _rho(v), judged)
        if outcome:
            answer = _answer(outcome)
            details = "; ".join(f"ρ = {_rho(v)}: {o.text()}" for v, o in outcome.items())
            lines.append(
                f"Does ReBias beat Vanilla on unbiased accuracy in this run? {answer}. ReBias vs Vanilla: {details}."
            )
    if lines:
        doc.para(" ".join(lines) + " Computed from the numbers above; nothing is tuned to the answer.")


def _vanilla_findings(acc, vanilla: str, variants: list[str]) -> tuple[bool | None, str, list[str]]:
    """What Vanilla's numbers say before any comparison (ReBias Table 1's Vanilla column): whether it
    learns the digits at all (the capability check at the weakest bias, against chance; None: not
    trained there) with the reason a failed check gives, and how far below its biased accuracy its
    unbiased one falls at the strongest bias (its reliance on colour), as the verdict's sentences."""
    lines = []
    capable, reason = None, ""
    if acc.get((variants[-1], vanilla, "unbiased")):
        task = "the digits' shape where colour is weakly tied to it"
        reference = acc[(variants[-1], vanilla, "unbiased")]
        capable, line = capability_line(
            "Vanilla",
            f"on the unbiased test set when trained at the lowest ρ = {_rho(variants[-1])}",
            reference,
            CHANCE,
            task,
        )
        reason = failed_check("Vanilla", reference, CHANCE, task)
        lines.append(line)
    v = variants[0]
    unb, bia = acc.get((v, vanilla, "unbiased")), acc.get((v, vanilla, "biased"))
    if unb and bia:
        gap = np.mean(bia) - np.mean(unb)
        lines.append(
            f"At ρ = {_rho(v)}, Vanilla reaches {mean_std(bia)} % on the biased test set but "
            f"{mean_std(unb)} % on the unbiased one ({gap:.1f} points lower): "
            + ("it predicts mostly from the colour." if gap > 10 else "the colour bias costs it little.")
        )
    return capable, reason, lines


def _answer(outcome: dict[str, Interval]) -> str:
    """The one-phrase answer to "does ReBias beat Vanilla on unbiased accuracy?" from the per-ρ
    differences (`core.statistics.difference`): yes only where it is higher at every ρ; a loss is
    named before any ρ where the interval cannot tell."""
    wins = [v for v, o in outcome.items() if o.verdict == "higher"]
    losses = [v for v, o in outcome.items() if o.verdict == "lower"]
    if len(wins) == len(outcome):
        return "Yes"
    if wins:
        return f"Higher only at ρ = {', '.join(_rho(v) for v in wins)}"
    if len(losses) == len(outcome):
        return "No: lower at every ρ"
    if losses:
        return f"No: lower at ρ = {', '.join(_rho(v) for v in losses)}, cannot tell elsewhere"
    return "Cannot tell"


def figure3(doc: Document, name: str, grid: dict[str, Any], rows: list[dict[str, Any]], path: Path) -> None:
    """ReBias Fig. 3: accuracy per (bias, class) cell on the unbiased test set, one matrix per
    method, for the models trained on `figure_variant`."""
    variant = grid["figure_variant"]
    cells: dict[str, dict[tuple[int, int], list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if (
            r.get("grid") == name
            and r["metric"] == "cell_accuracy"
            and r["train_variant"] == variant
            and r["variant"] == "unbiased"
        ):
            cells[r["grid_method"]][(r["bias_label"], r["class_label"])].append(r["value"])
    methods = [k for k in grid["methods"] if k in cells]
    doc.heading(f"Fig. 3 – {name}: accuracy per colour × digit cell (trained at ρ = {_rho(variant)})")
    if not methods:
        doc.para("No per-cell results in this run.")
        return
    n = 1 + max(max(b, y) for m in methods for b, y in cells[m])
    fig, axes = plt.subplots(
        1, len(methods), figsize=(1.9 * len(methods) + 0.8, 2.6), squeeze=False, layout="constrained"
    )
    for ax, key in zip(axes[0], methods):
        grid_acc = np.full((n, n), np.nan)
        for (b, y), values in cells[key].items():
            grid_acc[b, y] = np.mean(values)
        im = ax.imshow(grid_acc, vmin=0, vmax=100, cmap="viridis")
        diag, off = np.nanmean(np.diag(grid_acc)), np.nanmean(grid_acc[~np.eye(n, dtype=bool)])
        ax.set_title(f"{grid['methods'][key]['label']}\ndiag {diag:.0f} / off {off:.0f}", fontsize=8)
        ax.set_xlabel("digit", fontsize=7)
        ax.tick_params(labelsize=6)
    axes[0][0].set_ylabel("background colour", fontsize=7)
    fig.colorbar(im, ax=axes[0].tolist(), shrink=0.8, label="accuracy (%)")
    save_figure(fig, path, dpi=110)
    doc.image(
        path.name,
        "Unbiased test set, mean over seeds. Diagonal cells: the colour the digit was trained with "
        "(the biased accuracy); off-diagonal cells: unseen colour-digit pairs. A colour-reliant model "
        "is bright on the diagonal only.",
    )


def figure4(
    doc: Document, name: str, grid: dict[str, Any], config: dict[str, Any], rows: list[dict[str, Any]], path: Path
) -> None:
    """ReBias Fig. 4: the curve methods' accuracy on the curve test set, and HSIC(f, g) of the
    methods that log it, over training steps (mean over seeds)."""
    curves = grid.get("curves")
    doc.heading(f"Fig. 4 – {name}: learning curves (trained at ρ = {_rho(grid['figure_variant'])})")
    series: dict[tuple[str, str], dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        exp = config["experiments"].get(r.get("experiment", ""), {})
        if r.get("kind") == "curve" and exp.get("grid") == name:
            series[(exp["grid_method"], r["metric"])][r["step"]].append(r["value"])
    acc_metric = f"{curves['test_set']}_accuracy" if curves else ""  # "": no curves, no metric
    if not curves or not any(m == acc_metric for _, m in series):
        doc.para("No learning curves in this run (set `curves` in the grid).")
        return
    fig, (ax_acc, ax_hsic) = plt.subplots(1, 2, figsize=(9, 3.2))
    for key in curves["methods"]:
        label = grid["methods"][key]["label"]
        for ax, metric in ((ax_acc, acc_metric), (ax_hsic, "hsic")):
            points = series.get((key, metric))
            if points:
                steps = sorted(points)
                ax.plot(steps, [np.mean(points[s]) for s in steps], marker="o", markersize=3, label=label)
    ax_acc.set_ylabel(f"{curves['test_set']} accuracy (%)")
    ax_hsic.set_ylabel("HSIC(f, g) (training batches)")
    for ax in (ax_acc, ax_hsic):
        ax.set_xlabel("training step")
        ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    doc.image(
        path.name,
        f"Every {curves['every_steps']} steps: accuracy on the {curves['test_set']} test set (left) "
        "and the unbiased HSIC estimate between F's and G's pooled features, averaged over the "
        "steps since the previous point (right; only ReBias computes it).",
    )


def table2(doc: Document, config: dict[str, Any], rows: list[dict[str, Any]], paper: dict[str, list[float]]) -> None:
    """ReBias Table 2 on images: accuracy on the ORIGINAL validation images (biased) and the
    texture-cluster cell accuracy (unbiased) of `analyses.texture.experiments`; MIXED_RAND, the
    Background Challenge's own bias-conflicting test, is shown beside them."""
    texture = config["analyses"]["texture"]
    doc.heading("Table 2 (ReBias) – images: biased and texture-unbiased accuracy (%)")
    if not texture["experiments"]:
        doc.para(
            "No image experiments in `analyses.texture.experiments`: this config trains ReBias on Biased "
            "MNIST only. `config/imagenet9.yaml` lists the paper's runs (F = ResNet18, G = BagNet18 and the "
            "baselines, 120 epochs)."
        )
        return
    found = _image_results(config, rows, texture["experiments"])
    table_rows = []
    for exp in texture["experiments"]:
        method = config["experiments"][exp]["method"]
        quoted = [f"{v:.1f}" for v in paper[method]] if method in paper else ["–", "–"]
        table_rows.append(
            [
                config["experiments"][exp]["label"],
                mean_std(found[exp]["original"]),
                mean_std(found[exp]["texture"]),
                mean_std(found[exp]["mixed_rand"]),
                *quoted,
            ]
        )
    doc.table(
        ["Model", "Biased", "Unbiased (texture clusters)", "MIXED_RAND", "Biased (paper)", "Unbiased (paper)"],
        table_rows,
    )
    doc.para(
        f"Mean ± sample std over seeds, on the {config['evaluation']['dataset']} validation images. "
        f"{_texture_note(texture)} The paper's numbers are for its own 9-class ImageNet subset at 224 px, "
        "120 epochs."
    )


def _image_results(
    config: dict[str, Any], rows: list[dict[str, Any]], experiments: list[str]
) -> dict[str, dict[str, list[float]]]:
    """Per image experiment, in seed order, the values of ReBias Table 2's columns: `original` (its
    biased accuracy) and `mixed_rand` on the configured evaluation dataset's validation images (not
    the official test images), and `texture` (the texture-cluster unbiased accuracy of the analysis)."""
    found: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in sorted(rows, key=lambda r: r.get("seed", 0)):
        exp = r.get("experiment", "")  # "": none, not one of the experiments
        if exp not in experiments:
            continue
        if (
            r.get("kind") == "eval"
            and r["metric"] == "accuracy"
            and r["variant"] in ("original", "mixed_rand")
            and r.get("dataset") == config["evaluation"]["dataset"]
        ):  # not the official test images
            found[exp][r["variant"]].append(r["value"])
        elif r.get("analysis") == "texture" and r["metric"] == "texture_unbiased_accuracy":
            found[exp]["texture"].append(r["value"])
    return found


def _texture_note(texture: dict[str, Any]) -> str:
    """How Table 2's unbiased column is computed (ReBias Sec. 4.3.1: k-means clusters of VGG Gram
    features as the texture bias labels), naming the VGG the run used, or, without VGG weights, how
    to give them (nothing is downloaded)."""
    if texture["vgg"] or texture.get("vgg16"):
        network = (
            "VGG16 conv3_3 (torchvision's ImageNet weights, the authors' features[:-16])"
            if texture.get("vgg16")
            else "the normalised VGG-19's conv3_3, standing in for the authors' VGG16 "
            "conv3_3 (set `analyses.texture.vgg16` to torchvision's vgg16-397923af.pth for theirs)"
        )
        return (
            f"Unbiased: accuracy per (texture cluster, class) cell with more than {texture['min_population']} "
            f"images, averaged over the cells and over {len(texture['seeds'])} k-means clusterings "
            f"(k = {texture['k']}) of the L2-normalised Gram features of {network}."
        )
    return (
        "The unbiased column needs VGG weights: set `analyses.texture.vgg16` to torchvision's "
        "vgg16-397923af.pth (the authors' network) or `analyses.texture.vgg` to vgg_normalised.pth "
        "(md5 bb6e9a222ef3630ff734596f29ad8d20, the stand-in); nothing is downloaded."
    )
