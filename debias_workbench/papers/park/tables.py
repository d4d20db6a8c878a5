"""Report sections of Park, Chung & Choo (CVPR 2024). Grids with `report: park`: Table 1 in the
paper's layout (methods x bias-conflicting ratio) twice, validation-selected and best-test
("oracle", what the paper and its baselines report), the paper's numbers quoted beneath, the
capability line on Vanilla, a verdict computed from the numbers, Table 2 (what the committee and
the BN score keep, against the true bias labels) and Fig. 2 (BN scores of bias-aligned and
bias-conflicting candidates over training). Grids with `report: park_ablation`: Table 3 (each
row's switches, ours beside the paper's), the capability line, each row against the full method,
and how each row trained (partners' bias-conflicting share, L_guide.sim, training accuracy)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from debias_workbench.core.statistics import difference
from debias_workbench.pipeline.datasets import family_name, get_family
from debias_workbench.report import model_selection
from debias_workbench.report.document import Document
from debias_workbench.report.helpers import capability_line, failed_check, mean_std, save_figure, worst_group_cell
from debias_workbench.training.methods import spec as method_spec

#: the test set the tables score and the one model selection looks at (the colored_mnist family's)
TEST, VALID = "unbiased", "valid"
PARK_METHOD = "intrinsic_feature_enhancement"
DETECTION = [("aligned_set_precision", "D^A precision (BA, %)"), ("aligned_set_recall", "D^A recall (BA, %)"),
             ("candidate_set_precision", "D^BN_cand precision (BC, %)"),
             ("candidate_set_recall", "D^BN_cand recall (BC, %)"),
             ("bn_dropped_aligned", "D^BN_cand − D^BN: BA"), ("bn_dropped_conflicting", "D^BN_cand − D^BN: BC"),
             ("bn_kept_aligned_percent", "D^BN / D: BA (%)"), ("bn_kept_conflicting_percent", "D^BN / D: BC (%)")]


#: Park et al.'s Table 3 columns: the method_args each ablation row switches, and how the table shows their values
SWITCHES = {"guide": "L_guide", "bn_loss": "L_BN", "partner_source": "x^BN from", "score_weight": "s(x^BN) as weight",
            "guide_sim": "Eq. 9 reading"}
SWITCH_VALUES = {True: "✓", False: "✗", "D": "D", "D_cand": "D^BN_cand", "D_BN": "D^BN",
                 "target_shares": "target, shares", "target_raw": "target, raw", "through_both": "through both"}


#: the training statistics of `_training_health`, in its columns' order
HEALTH = ("partner_conflicting_fraction", "partner_weight", "guide_distance", "ie_mean", "train_acc")


def _versus(doc: Document, grid: dict[str, Any], cells: dict, variant: str, key: str, other: str) -> str:
    """The interval and verdict of row `key` minus row `other`, validation-selected, at one ratio, recorded
    as the section's verdict."""
    judged = difference(cells.get((variant, key), {}).get("selected", []),
                        cells.get((variant, other), {}).get("selected", []))
    doc.verdict(f"{_comparison(grid, key, other)}, {_percent(variant):g} % conflicting", judged)
    return judged.text()


def _comparison(grid: dict[str, Any], key: str, other: str) -> str:
    """ "Ours (Park et al.) vs LfF+BE (validation-selected)": the comparison of rows `key` and `other`."""
    return f"{grid['methods'][key]['label']} vs {grid['methods'][other]['label']} (validation-selected)"


def _not_judged(doc: Document, grid: dict[str, Any], pairs: list[tuple[str, str]], reason: str) -> None:
    """Records each (row, other row) comparison of `pairs` as not informative, for `reason`."""
    for key, other in pairs:
        doc.no_verdict(_comparison(grid, key, other), reason)


def _percent(variant: str) -> float:
    """p of `conflict_<p>` (Colored MNIST, Waterbirds, BFFHQ, BAR) and of `bg_conflict_<p>` (IN-9)."""
    return float(variant.rsplit("_", 1)[1])


def selected_and_oracle(rows: list[dict[str, Any]], config: dict[str, Any], grid: str,
                        metric: str) -> dict[tuple[str, str], dict[str, list[float]]]:
    """{(train variant, method key): {"selected": [...], "oracle": [...]}} per seed: the test
    `metric` under `model_selection`'s rules "validation" and "oracle" (the scoring points are
    the model-selection curve rows plus the final evaluation)."""
    runs = {e for e, exp in config["experiments"].items() if exp.get("grid") == grid}
    out: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: {"selected": [], "oracle": []})
    for kind, rule in (("selected", "validation"), ("oracle", "oracle")):
        for experiment, values in model_selection.selected(rows, runs, TEST, metric, rule, VALID).items():
            exp = config["experiments"][experiment]
            out[(exp["train_variant"], exp["grid_method"])][kind] = values
    return out


def amplification_sections(doc: Document, config: dict[str, Any], rows: list[dict[str, Any]], paper: dict[str, Any],
                           out_dir: Path) -> None:
    for name, grid in config.get("grids", {}).items():
        if grid.get("report") == "park_ablation":
            _table3(doc, config, name, grid, rows, paper["park_table3"])
        if grid.get("report") != "park":
            continue
        metric = grid["model_selection"]["metric"] if grid.get("model_selection") else "accuracy"
        cells = selected_and_oracle(rows, config, name, metric)
        variants = sorted(grid["train_variants"], key=_percent)
        chance = 100.0 / _num_classes(config, grid["dataset"])
        doc.heading(f"Park et al. (CVPR 2024), Table 1 – {name}: {metric.replace('_', ' ')} (%) on the {TEST} test set "
                    f"of {grid['dataset']}")
        val_split = get_family(family_name(config["datasets"][grid["dataset"]])).val_split
        doc.para(f"Mean ± sample std over {_seeds_per_row(config, name)}, by the share of bias-conflicting "
                 "training samples. "
                 f"Validation-selected: the test value at the scoring point (every "
                 f"{grid.get('model_selection', {}).get('every_steps', '–')} steps, and the end) with the best "
                 f"accuracy on the val split ({val_split}). Best test "
                 "(\"oracle\"): the best test value over those points, as the paper and the LfF / BiasEnsemble code "
                 "report; it selects on the test set and flatters every method. α_l, α_s and τ are from a "
                 "supplementary we do not have (supplementary unavailable: BiasEnsemble's EMA 0.7, τ = 1).")
        for kind, title in (("selected", "validation-selected"), ("oracle", "best test (oracle)")):
            doc.table([f"Method ({title})", *[f"{_percent(v):g} %" for v in variants]],
                      [[m["label"], *[mean_std(cells.get((v, key), {}).get(kind, [])) for v in variants]]
                       for key, m in grid["methods"].items()])
        quoted = paper["park_table1"]
        doc.table(["Method (paper: best test, 5 seeds; backbone not named in its text)", *quoted["columns"]],
                  [[r["model"], *[f"{v:.2f}" for v in r["values"]]] for r in quoted["rows"]])
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
    doc.table(["Method (worst group, validation-selected)", *[f"{_percent(v):g} %" for v in variants]],
              [[m["label"], *[worst_group_cell(worst.get((v, key), {}).get("selected", [])) for v in variants]]
               for key, m in grid["methods"].items()])
    doc.para("Worst group: the (digit, colour) group of the test set with the lowest accuracy, per run; n is its "
             "number of test images (a range where seeds differ), the interval covers seeds and test images.")


def _seeds_per_row(config: dict[str, Any], grid: str) -> str:
    """"3 seeds (Vanilla, LfF+BE, Ours), 1 seed (ReBias, LfF)": the rows grouped by their seed count."""
    n_seeds = {exp["grid_method"]: len(exp["seeds"]) for exp in config["experiments"].values()
               if exp.get("grid") == grid}
    groups: dict[int, list[str]] = defaultdict(list)
    for key, method in config["grids"][grid]["methods"].items():
        groups[n_seeds.get(key, 0)].append(method["label"])
    if len(groups) == 1:
        return f"{next(iter(groups))} seed(s)"
    return ", ".join(f"{n} seed{'s' if n > 1 else ''} ({', '.join(labels)})"
                     for n, labels in sorted(groups.items(), reverse=True))


def _num_classes(config: dict[str, Any], dataset: str) -> int:
    return len(config["datasets"][dataset].get("classes", range(10)))


def _verdict(doc: Document, grid: dict[str, Any], cells, conflicting, variants: list[str], chance: float) -> None:
    """The capability line (Vanilla on the bias-conflicting test samples at the largest ratio),
    then the Park et al. row against LfF+BE, LfF and Vanilla at every ratio (validation-selected)."""
    keys = {m["method"]: key for key, m in grid["methods"].items()}
    vanilla, ours = keys.get("vanilla") or keys.get("erm"), keys.get(PARK_METHOD)
    if vanilla is None or ours is None:
        doc.para("No Vanilla or no Park et al. run in this grid: no verdict.")
        return
    others = [k for k in (keys.get("lff_be"), keys.get("lff"), vanilla) if k]
    capable, reason = _capable(doc, grid, conflicting, variants, chance)
    if not capable:
        _not_judged(doc, grid, [(ours, other) for other in others], reason)
        doc.para("Does Park et al.'s guidance beat its baselines here? Not informative.")
        return
    parts = []
    for other in others:
        per_ratio = [f"{_percent(v):g} %: {_versus(doc, grid, cells, v, ours, other)}" for v in variants]
        parts.append(f"against {grid['methods'][other]['label']}: " + "; ".join(per_ratio))
    doc.para(f"{grid['methods'][ours]['label']}, validation-selected, " + ". ".join(parts) + ".")


def _capable(doc: Document, grid: dict[str, Any], conflicting, variants: list[str],
             chance: float) -> tuple[bool, str]:
    """Writes the capability line: does the grid's Vanilla (validation-selected) learn the digits beyond
    their colour on the bias-conflicting test samples at the largest ratio? (capable, why not where not);
    not capable without a Vanilla."""
    vanilla = next((key for key, m in grid["methods"].items() if m["method"] in ("vanilla", "erm")), None)
    if vanilla is None:
        doc.para("No Vanilla run in this grid: nothing shows that the benchmark can judge.")
        return False, "no Vanilla run to check the benchmark"
    hardest = variants[-1]  # the most conflicting samples: the easiest setting
    label, task = grid["methods"][vanilla]["label"], "the classes beyond their bias"
    values = conflicting.get((hardest, vanilla), {}).get("selected", [])
    capable, line = capability_line(label, f"on the bias-conflicting samples of the {TEST} test set, trained at "
                                    f"{_percent(hardest):g} % conflicting (validation-selected)", values, chance, task)
    doc.para(line)
    return capable, "" if capable else failed_check(label, values, chance, task)


def switches(config: dict[str, Any], grid: str, key: str) -> dict[str, Any]:
    """The Table 3 switches a Park et al. method of `grid` sets away from their defaults ({} = the full method)."""
    defaults = method_spec(PARK_METHOD).defaults
    args = next(exp.get("method_args", {}) for exp in config["experiments"].values()
                if exp.get("grid") == grid and exp.get("grid_method") == key)
    return {k: args[k] for k in SWITCHES if k in args and args[k] != defaults[k]}


def _table3(doc: Document, config: dict[str, Any], name: str, grid: dict[str, Any], rows: list[dict[str, Any]],
            quoted: dict[str, Any]) -> None:
    """Park et al. Table 3: each Park et al. row of the grid by its switches, validation-selected and
    oracle per ratio, the paper's row with the same switches beside it; the capability line; every
    row against the full method; how each row trained."""
    metric = grid["model_selection"]["metric"]
    cells = selected_and_oracle(rows, config, name, metric)
    conflicting = selected_and_oracle(rows, config, name, "conflicting_accuracy")
    variants = sorted(grid["train_variants"], key=_percent)
    chance = 100.0 / _num_classes(config, grid["dataset"])
    park = {key: switches(config, name, key) for key, m in grid["methods"].items() if m["method"] == PARK_METHOD}
    defaults = method_spec(PARK_METHOD).defaults
    doc.heading(f"Park et al. (CVPR 2024), Table 3 (ablation) – {name}: {metric.replace('_', ' ')} (%) on the {TEST} "
                f"test set of {grid['dataset']}")
    doc.para(f"Mean ± sample std over {_seeds_per_row(config, name)}. Validation-selected and best test (oracle) as in "
             "Table 1. The paper's columns are its Table 3 (best test accuracy at 1 %, 5 seeds) on its own "
             "datasets, for the row with the same switches; only the pattern across rows compares. Eq. 9 reading: "
             "g(z) a fixed target, compared on channel shares (target, shares: bounded) or on the raw GAP features "
             "(target, raw: the literal loss), or the gradient through both sides and IE (through both).")
    paper_rows = {tuple(sorted(r["switches"].items())): r["values"] for r in quoted["rows"]}
    header = ["Row", *SWITCHES.values(),
              *[f"{_percent(v):g} % ({kind})" for kind in ("selected", "oracle") for v in variants],
              *[f"paper {c}" for c in quoted["columns"]]]
    table = []
    for key, changed in park.items():
        values = {**{k: defaults[k] for k in SWITCHES}, **changed}
        table.append([grid["methods"][key]["label"], *[SWITCH_VALUES[values[k]] for k in SWITCHES],
                      *[mean_std(cells.get((v, key), {}).get(kind, []))
                        for kind in ("selected", "oracle") for v in variants],
                      *paper_rows.get(tuple(sorted(changed.items())), ["–"] * len(quoted["columns"]))])
    doc.table(header, table)
    others = [key for key in grid["methods"] if key not in park]
    if others:
        doc.table(["Reference row",
                   *[f"{_percent(v):g} % ({kind})" for kind in ("selected", "oracle") for v in variants]],
                  [[grid["methods"][key]["label"], *[mean_std(cells.get((v, key), {}).get(kind, []))
                                                      for kind in ("selected", "oracle") for v in variants]]
                   for key in others])
    full = next((key for key, changed in park.items() if not changed), None)
    capable, reason = _capable(doc, grid, conflicting, variants, chance)
    if capable and full is not None:
        lines = [f"{grid['methods'][key]['label']} vs the full method: " + "; ".join(
            f"{_percent(v):g} %: {_versus(doc, grid, cells, v, key, full)}"
            for v in variants) for key in park if key != full]
        doc.para("Each row against the full method (validation-selected): " + ". ".join(lines) + ".")
    elif full is None:
        doc.para("No row with every switch at its default (the full method): no comparison.")
    else:
        _not_judged(doc, grid, [(key, full) for key in park if key != full], reason)
        doc.para("Which components help here? Not informative.")
    _training_health(doc, config, name, grid, rows, list(park), variants)


def _training_health(doc: Document, config: dict[str, Any], name: str, grid: dict[str, Any], rows: list[dict[str, Any]],
                     keys: list[str], variants: list[str]) -> None:
    """Per row and ratio: the share of bias-conflicting partners x^BN over the guided epochs, their mean
    weight s(x^BN) and Eq. 9's distance (without that weight) in the first and the last guided epoch,
    the mean IE weight and the training accuracy of the last epoch (mean over seeds): what tells a
    reading of Eq. 9 that diverges, or that cancels its own guidance (IE -> 1), from one that does
    neither."""
    per: dict[tuple[str, str, str], dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        exp = config["experiments"].get(r.get("experiment", ""), {})
        if r.get("kind") == "train" and exp.get("grid") == name and exp.get("grid_method") in keys and \
                r["metric"] in HEALTH:
            per[(exp["grid_method"], exp["train_variant"], r["metric"])][r["epoch"]].append(r["value"])

    def show(key: str, variant: str) -> list[str]:
        bc, weight, sim, ie, acc = (per.get((key, variant, m), {}) for m in HEALTH)
        share = f"{100 * np.mean([v for vals in bc.values() for v in vals]):.0f}" if bc else "–"

        def first_last(by_epoch: dict, fmt: str) -> str:
            if not by_epoch:
                return "–"
            return f"{np.mean(by_epoch[min(by_epoch)]):{fmt}} → {np.mean(by_epoch[max(by_epoch)]):{fmt}}"

        return [share, first_last(weight, ".2f"), first_last(sim, ".3g"), f"{np.mean(ie[max(ie)]):.4f}" if ie else "–",
                f"{100 * np.mean(acc[max(acc)]):.1f}" if acc else "–"]

    if not per:
        return
    doc.para("How each row trained (mean over seeds): the share of bias-conflicting samples among the partners x^BN "
             "(from the true bias labels, never used in training); their weight s(x^BN) (1 without the weight) and "
             "Eq. 9's "
             "L1 distance (without that weight; bounded by 2 for the shares reading) in the first and the last guided "
             "epoch; the mean IE weight and the training accuracy (%) of the last epoch (the training set is mostly "
             "bias-aligned, so a model that leaves the bias behind fits less of it).")
    doc.table(["Row", *[f"{_percent(v):g} %: {c}" for v in variants
                        for c in ("x^BN BC (%)", "s(x^BN)", "Eq. 9 distance", "IE (end)", "train acc")]],
              [[grid["methods"][key]["label"], *[c for v in variants for c in show(key, v)]] for key in keys])


def _table2(doc: Document, config: dict[str, Any], name: str, grid: dict[str, Any], rows: list[dict[str, Any]],
            quoted: dict[str, Any]) -> None:
    """Detection quality against the true bias labels at the grid's figure variant."""
    variant = grid["figure_variant"]
    found: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in sorted(rows, key=lambda r: r.get("seed", 0)):
        exp = config["experiments"].get(r.get("experiment", ""), {})
        if (r.get("kind") == "train" and exp.get("grid") == name and exp.get("train_variant") == variant
                and r["metric"] in dict(DETECTION)):
            found[exp["grid_method"]][r["metric"]].append(r["value"])
    if not found:
        return
    doc.heading(f"Park et al. Table 2 – {name}: what the committee and the BN score keep "
                f"({_percent(variant):g} % conflicting)")
    doc.para("Against the true bias labels (never used in training): D^A should hold bias-aligned (BA) samples, "
             "D^BN_cand and D^BN bias-conflicting (BC) ones. Counts and shares at the end of training, mean ± std "
             "over seeds.")
    present = [(k, label) for k, label in DETECTION if any(k in per for per in found.values())]
    doc.table(["Method", *[label for _, label in present]],
              [[grid["methods"][key]["label"], *[mean_std(found[key].get(k, [])) for k, _ in present]]
               for key in grid["methods"] if key in found])
    doc.table(["Dataset (paper, 1 %, 50K iterations)", *quoted["columns"]],
              [[r["dataset"], *r["values"]] for r in quoted["rows"]])


def _figure2(doc: Document, config: dict[str, Any], name: str, grid: dict[str, Any], rows: list[dict[str, Any]],
             variants: list[str], path: Path) -> None:
    """Mean BN score of the BA and BC samples of D^BN_cand over training, per train variant."""
    series: dict[tuple[str, str], dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        exp = config["experiments"].get(r.get("experiment", ""), {})
        if (r.get("kind") == "curve" and exp.get("grid") == name and exp.get("method") == PARK_METHOD
                and r["metric"] in ("bn_score_aligned", "bn_score_conflicting")):
            series[(exp["train_variant"], r["metric"])][r["step"]].append(r["value"])
    shown = [v for v in variants if any(series.get((v, m)) for m in ("bn_score_aligned", "bn_score_conflicting"))]
    if not shown:
        return
    fig, axes = plt.subplots(1, len(shown), figsize=(3.2 * len(shown), 2.8), squeeze=False)
    for ax, variant in zip(axes[0], shown):
        for metric, colour, label in (("bn_score_aligned", "tab:red", "BA"),
                                      ("bn_score_conflicting", "tab:blue", "BC")):
            points = series.get((variant, metric), {})
            if not points:  # e.g. D^BN_cand holds no bias-aligned sample: no line, and the panel says so
                ax.text(0.03, 0.97, f"no {label} sample in D^BN_cand", transform=ax.transAxes, fontsize=7, va="top")
                continue
            steps = sorted(points)
            ax.plot(steps, [np.mean(points[s]) for s in steps], color=colour, label=label)
        ax.legend(fontsize=7, loc="lower right")
        ax.axhline(0, color="black", linewidth=0.5)
        ax.set_title(f"{_percent(variant):g} % conflicting", fontsize=9)
        ax.set_xlabel("training step")
    axes[0][0].set_ylabel("mean BN score in D^BN_cand")
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    doc.heading(f"Park et al. Fig. 2 – {name}: BN scores during training")
    doc.image(path.name, "Mean BN score (Eq. 2) of the bias-aligned (red) and bias-conflicting (blue) samples of "
                         "D^BN_cand, averaged over the steps between scoring points and over seeds; 0 until the "
                         "reference loss is recorded at T1.")
