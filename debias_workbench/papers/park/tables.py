"""Report sections of Park, Chung & Choo (CVPR 2024). Grids with `report: park`: Table 1 in the
paper's layout (methods x bias-conflicting ratio) twice, validation-selected and best-test
("oracle", what the paper and its baselines report), the paper's numbers quoted beneath, the
capability line on Vanilla, a verdict computed from the numbers, Table 2 (what the committee and
the BN score keep, against the true bias labels) and Fig. 2 (BN scores of bias-aligned and
bias-conflicting candidates over training). Grids with `report: park_ablation`: Table 3 (each
row's switches, ours beside the paper's), the capability line, each row against the full method,
and how each row trained (partners' bias-conflicting share, L_guide.sim, training accuracy): `ablation`.
What the tables read of a grid, and how they compare two rows: `grid_results`."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from debias_workbench.pipeline.datasets import family_name, get_family
from debias_workbench.report.document import Document
from debias_workbench.report.helpers import mean_std, save_figure, worst_group_cell

from .ablation import table3
from .grid_results import (
    PARK_METHOD,
    TEST,
    capability,
    not_judged,
    num_classes,
    percent,
    seeds_per_row,
    selected_and_oracle,
    versus,
)

DETECTION = [
    ("aligned_set_precision", "D^A precision (BA, %)"),
    ("aligned_set_recall", "D^A recall (BA, %)"),
    ("candidate_set_precision", "D^BN_cand precision (BC, %)"),
    ("candidate_set_recall", "D^BN_cand recall (BC, %)"),
    ("bn_dropped_aligned", "D^BN_cand − D^BN: BA"),
    ("bn_dropped_conflicting", "D^BN_cand − D^BN: BC"),
    ("bn_kept_aligned_percent", "D^BN / D: BA (%)"),
    ("bn_kept_conflicting_percent", "D^BN / D: BC (%)"),
]


def amplification_sections(
    doc: Document, config: dict[str, Any], rows: list[dict[str, Any]], paper: dict[str, Any], out_dir: Path
) -> None:
    for name, grid in config.get("grids", {}).items():
        if grid.get("report") == "park_ablation":
            table3(doc, config, name, grid, rows, paper["park_table3"])
        if grid.get("report") != "park":
            continue
        metric = grid["model_selection"]["metric"] if grid.get("model_selection") else "accuracy"
        cells = selected_and_oracle(rows, config, name, metric)
        variants = sorted(grid["train_variants"], key=percent)
        chance = 100.0 / num_classes(config, grid["dataset"])
        doc.heading(
            f"Park et al. (CVPR 2024), Table 1 – {name}: {metric.replace('_', ' ')} (%) on the {TEST} test set "
            f"of {grid['dataset']}"
        )
        val_split = get_family(family_name(config["datasets"][grid["dataset"]])).val_split
        doc.para(
            f"Mean ± sample std over {seeds_per_row(config, name)}, by the share of bias-conflicting "
            "training samples. "
            f"Validation-selected: the test value at the scoring point (every "
            f"{grid.get('model_selection', {}).get('every_steps', '–')} steps, and the end) with the best "
            f"accuracy on the val split ({val_split}). Best test "
            "(\"oracle\"): the best test value over those points, as the paper and the LfF / BiasEnsemble code "
            "report; it selects on the test set and flatters every method. α_l, α_s and τ are from a "
            "supplementary we do not have (supplementary unavailable: BiasEnsemble's EMA 0.7, τ = 1)."
        )
        for kind, title in (("selected", "validation-selected"), ("oracle", "best test (oracle)")):
            doc.table(
                [f"Method ({title})", *[f"{percent(v):g} %" for v in variants]],
                [
                    [m["label"], *[mean_std(cells.get((v, key), {}).get(kind, [])) for v in variants]]
                    for key, m in grid["methods"].items()
                ],
            )
        quoted = paper["park_table1"]
        doc.table(
            ["Method (paper: best test, 5 seeds; backbone not named in its text)", *quoted["columns"]],
            [[r["model"], *[f"{v:.2f}" for v in r["values"]]] for r in quoted["rows"]],
        )
        conflicting = selected_and_oracle(rows, config, name, "conflicting_accuracy")
        _worst_groups(doc, grid, selected_and_oracle(rows, config, name, "worst_group_accuracy"), variants)
        _verdict(doc, grid, cells, conflicting, variants, chance)
        _table2(doc, config, name, grid, rows, paper["park_table2"])
        _figure2(doc, config, name, grid, rows, variants, out_dir / f"park_fig2_{name}.png")


def _worst_groups(doc: Document, grid: dict[str, Any], worst, variants: list[str]) -> None:
    """Worst-group accuracy (validation-selected) per method and ratio, with the size of the worst
    (label, bias label) group and the 95 % interval of the mean (`core.statistics.mean_interval`)."""
    if not any(c.get("selected") for c in worst.values()):
        return
    doc.table(
        ["Method (worst group, validation-selected)", *[f"{percent(v):g} %" for v in variants]],
        [
            [m["label"], *[worst_group_cell(worst.get((v, key), {}).get("selected", [])) for v in variants]]
            for key, m in grid["methods"].items()
        ],
    )
    doc.para(
        "Worst group: the (digit, colour) group of the test set with the lowest accuracy, per run; n is its "
        "number of test images (a range where seeds differ), the interval covers seeds and test images."
    )


def _verdict(doc: Document, grid: dict[str, Any], cells, conflicting, variants: list[str], chance: float) -> None:
    """The capability line (Vanilla on the bias-conflicting test samples at the largest ratio),
    then the Park et al. row against LfF+BE, LfF and Vanilla at every ratio (validation-selected)."""
    keys = {m["method"]: key for key, m in grid["methods"].items()}
    vanilla, ours = keys.get("vanilla") or keys.get("erm"), keys.get(PARK_METHOD)
    if vanilla is None or ours is None:
        doc.para("No Vanilla or no Park et al. run in this grid: no verdict.")
        return
    others = [k for k in (keys.get("lff_be"), keys.get("lff"), vanilla) if k]
    capable, reason = capability(doc, grid, conflicting, variants, chance)
    if not capable:
        not_judged(doc, grid, [(ours, other) for other in others], reason)
        doc.para("Does Park et al.'s guidance beat its baselines here? Not informative.")
        return
    parts = []
    for other in others:
        per_ratio = [f"{percent(v):g} %: {versus(doc, grid, cells, v, ours, other)}" for v in variants]
        parts.append(f"against {grid['methods'][other]['label']}: " + "; ".join(per_ratio))
    doc.para(f"{grid['methods'][ours]['label']}, validation-selected, " + ". ".join(parts) + ".")


def _table2(
    doc: Document,
    config: dict[str, Any],
    name: str,
    grid: dict[str, Any],
    rows: list[dict[str, Any]],
    quoted: dict[str, Any],
) -> None:
    """Detection quality against the true bias labels at the grid's figure variant."""
    variant = grid["figure_variant"]
    found: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in sorted(rows, key=lambda r: r.get("seed", 0)):
        exp = config["experiments"].get(r.get("experiment", ""), {})
        if (
            r.get("kind") == "train"
            and exp.get("grid") == name
            and exp.get("train_variant") == variant
            and r["metric"] in dict(DETECTION)
        ):
            found[exp["grid_method"]][r["metric"]].append(r["value"])
    if not found:
        return
    doc.heading(
        f"Park et al. Table 2 – {name}: what the committee and the BN score keep ({percent(variant):g} % conflicting)"
    )
    doc.para(
        "Against the true bias labels (never used in training): D^A should hold bias-aligned (BA) samples, "
        "D^BN_cand and D^BN bias-conflicting (BC) ones. Counts and shares at the end of training, mean ± std "
        "over seeds."
    )
    present = [(k, label) for k, label in DETECTION if any(k in per for per in found.values())]
    doc.table(
        ["Method", *[label for _, label in present]],
        [
            [grid["methods"][key]["label"], *[mean_std(found[key].get(k, [])) for k, _ in present]]
            for key in grid["methods"]
            if key in found
        ],
    )
    doc.table(
        ["Dataset (paper, 1 %, 50K iterations)", *quoted["columns"]],
        [[r["dataset"], *r["values"]] for r in quoted["rows"]],
    )


def _figure2(
    doc: Document,
    config: dict[str, Any],
    name: str,
    grid: dict[str, Any],
    rows: list[dict[str, Any]],
    variants: list[str],
    path: Path,
) -> None:
    """Mean BN score of the BA and BC samples of D^BN_cand over training, per train variant."""
    series: dict[tuple[str, str], dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        exp = config["experiments"].get(r.get("experiment", ""), {})
        if (
            r.get("kind") == "curve"
            and exp.get("grid") == name
            and exp.get("method") == PARK_METHOD
            and r["metric"] in ("bn_score_aligned", "bn_score_conflicting")
        ):
            series[(exp["train_variant"], r["metric"])][r["step"]].append(r["value"])
    shown = [v for v in variants if any(series.get((v, m)) for m in ("bn_score_aligned", "bn_score_conflicting"))]
    if not shown:
        return
    fig, axes = plt.subplots(1, len(shown), figsize=(3.2 * len(shown), 2.8), squeeze=False)
    for ax, variant in zip(axes[0], shown):
        for metric, colour, label in (
            ("bn_score_aligned", "tab:red", "BA"),
            ("bn_score_conflicting", "tab:blue", "BC"),
        ):
            points = series.get((variant, metric), {})
            if not points:  # e.g. D^BN_cand holds no bias-aligned sample: no line, and the panel says so
                ax.text(0.03, 0.97, f"no {label} sample in D^BN_cand", transform=ax.transAxes, fontsize=7, va="top")
                continue
            steps = sorted(points)
            ax.plot(steps, [np.mean(points[s]) for s in steps], color=colour, label=label)
        ax.legend(fontsize=7, loc="lower right")
        ax.axhline(0, color="black", linewidth=0.5)
        ax.set_title(f"{percent(variant):g} % conflicting", fontsize=9)
        ax.set_xlabel("training step")
    axes[0][0].set_ylabel("mean BN score in D^BN_cand")
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    doc.heading(f"Park et al. Fig. 2 – {name}: BN scores during training")
    doc.image(
        path.name,
        "Mean BN score (Eq. 2) of the bias-aligned (red) and bias-conflicting (blue) samples of "
        "D^BN_cand, averaged over the steps between scoring points and over seeds; 0 until the "
        "reference loss is recorded at T1.",
    )
