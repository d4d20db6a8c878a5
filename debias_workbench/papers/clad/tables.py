"""Report sections of the CLAD paper: Table 2 (ours beside the paper's) and the same columns on the
official test images, every variant, the BG-GAP verdict, Tables 3-6 (its Figs. 5-8: `figures`).

Every section prints our numbers (mean ± sample std over seeds) beside the paper's where the
paper gives them, and says so when a section has no runs in this configuration.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from debias_workbench.core.statistics import difference
from debias_workbench.report.document import Document
from debias_workbench.report.helpers import (
    capability_line,
    failed_check,
    headline,
    mean_std,
    metric_table,
    model_order,
    sweep_only_experiments,
)
from debias_workbench.report.roles import paper_name, played

TABLE2_COLUMNS, TABLE2_HEADER = headline("in9")
CLAD_METHODS = ("clad", "clad_plus")
#: the verdict on CLAD's BG-GAP minus Base (IN9)'s (core.statistics), in words (a lower gap is better)
GAP_VERDICTS = {
    "lower": "so {label} reduces the gap",
    "higher": "so {label} widens the gap",
    "cannot tell": "so these runs cannot tell whether {label} changes the gap",
}


def table2(doc: Document, table, paper: dict[str, Any], roles: dict[str, str]) -> None:
    doc.heading("Table 2 – Background Challenge accuracy (%)")
    rows = [["Ours (this run)", *row] for row in model_rows(table, TABLE2_COLUMNS, roles)]
    for prow in paper["rows"]:
        rows.append(
            [f"{prow['type']} (paper)", prow["model"], *["–" if v is None else f"{v:.1f}" for v in prow["values"]]]
        )
    doc.table(["Type", "Model", *TABLE2_HEADER], rows)
    gaps = {label: np.mean(table[label]["bg_gap"]) for label in table if table[label].get("bg_gap")}
    base, mixed = roles.get("base_in9"), roles.get("base_mr")
    if base in gaps and mixed in gaps:
        doc.para(
            f"BG-GAP of {base} here: {gaps[base]:.1f} points; of {mixed}: {gaps[mixed]:.1f} "
            "points. A positive gap means the model gains accuracy from a background of the right class; a "
            f"negative one that it does better on random backgrounds ({mixed} is trained on MIXED_RAND-style "
            "composites, so MIXED_RAND is its own training distribution)."
        )


def model_rows(table, columns: list[str], roles: dict[str, str]) -> list[list[str]]:
    """One row per model (in report order): its label and mean ± std of each column."""
    return [[label, *[mean_std(table[label].get(c, [])) for c in columns]] for label in model_order(table, roles)]


def official(doc: Document, official: str | None, table, roles: dict[str, str]) -> None:
    """Table 2's columns on the official Background Challenge test images, read as released."""
    doc.heading("Background Challenge, official test images (%)")
    if official is None:
        doc.para(
            "Not scored: point a `bg_challenge` dataset at the released `bg_challenge/` folder and set "
            "`evaluation.official_dataset` to it to score every model on the authors' test images as well as on "
            "the variants regenerated here."
        )
        return
    doc.para(
        f"The same models on dataset `{official}`: the released test images read as they are (resized to the "
        "models' input size), without our segmentation or compositing."
    )
    doc.table(["Model", *TABLE2_HEADER], model_rows(table, TABLE2_COLUMNS, roles))


def all_variants(doc: Document, table, variants: list[str], roles: dict[str, str]) -> None:
    doc.heading("Accuracy on every variant (%)")
    doc.table(["Model", *variants], model_rows(table, variants, roles))


def bg_gap_verdict(
    doc: Document,
    regenerated: dict[str, dict[str, list[float]]],
    official: dict[str, dict[str, list[float]]] | None,
    roles: dict[str, str],
    chance: float = 100 / 9,
) -> None:
    """Says plainly, from the numbers, whether CLAD / CLAD+ reduce the BG-GAP of Base (IN9) -
    after checking that the benchmark can judge at all: Base (MR), which sees no useful
    background, must recognise the foreground (ONLY_FG well above chance). The verdict is drawn
    on the official Background Challenge test images where they were scored (the paper's Table 2
    is on those), else on the regenerated variants, and says which."""
    base_label, reference = roles.get("base_in9", ""), roles.get("base_mr", "")  # "": no such row
    use_official = official is not None and bool(official.get(base_label, {}).get("bg_gap"))
    table = official if official is not None and use_official else regenerated
    base = table.get(base_label, {}).get("bg_gap")
    if not base:
        return
    labels = [label for label in played(roles, ("clad", "clad_plus"))[0] if table.get(label, {}).get("bg_gap")]
    doc.heading(
        f"BG-GAP verdict: {' / '.join(labels)} against {base_label}"
        if labels
        else f"BG-GAP verdict against {base_label}"
    )
    doc.para(
        "The verdict below is drawn on "
        + (
            "the official Background Challenge test images (Xiao et al.'s release, as the paper's Table 2)."
            if use_official
            else "the Mixed-Same / Mixed-Rand images regenerated "
            "here (no official test images were given: `evaluation.official_dataset`)."
        )
    )
    if not _benchmark_judges(doc, table, reference, labels, base_label, chance):
        return
    lines = [_gap_line(doc, table, label, base_label) for label in labels]
    if lines:
        doc.para(" ".join(lines) + " The verdict is computed from the numbers above; nothing is tuned to it.")


def _benchmark_judges(
    doc: Document,
    table: dict[str, dict[str, list[float]]],
    reference: str,
    labels: list[str],
    base_label: str,
    chance: float,
) -> bool:
    """The capability check behind the BG-GAP verdict: the reference model (Base (MR), which sees no useful
    background) must recognise the foreground (ONLY_FG well above chance); False, with each method's
    no-verdict, when it does not (a smaller gap could then only come from using the background less)."""
    only_fg = table.get(reference, {}).get("only_fg", [])
    if only_fg:
        task = "to recognise the foreground"
        capable, line = capability_line(reference, "on ONLY_FG", only_fg, chance, task)
        doc.para(line)
        if not capable:
            for label in labels:
                doc.no_verdict(
                    f"{label} vs {base_label}, BG-GAP (lower is better)", failed_check(reference, only_fg, chance, task)
                )
            doc.para(
                f"Does CLAD reduce the BG-GAP of {base_label} here? Not informative: the reference model does not "
                "recognise the objects, so a smaller gap could only come from using the background less."
            )
            return False
    else:
        doc.para(
            "Capability check: no Base (MR) run (ERM on MIXED_RAND) with ONLY_FG accuracy in this configuration, "
            "so whether the benchmark can judge the methods is unknown."
        )
    return True


def _gap_line(doc: Document, table: dict[str, dict[str, list[float]]], label: str, base_label: str) -> str:
    """The verdict on `label`'s BG-GAP minus `base_label`'s, recorded and in words; where the gap is smaller,
    whether Mixed-Rand accuracy rose with it (recognising the foreground) or not (using the background less)."""
    base = table[base_label]["bg_gap"]
    gap = table[label]["bg_gap"]
    judged = difference(gap, base)  # "lower" only where its 95 % interval lies below 0
    verdict = GAP_VERDICTS[judged.verdict].format(label=label)
    doc.verdict(
        f"{label} vs {base_label}, BG-GAP (lower is better)",
        judged,
        "" if judged.verdict == "cannot tell" else verdict.removeprefix("so "),
    )
    rand, base_rand = table[label].get("mixed_rand", []), table[base_label].get("mixed_rand", [])
    line = (
        f"BG-GAP (lower is better), {label} vs {base_label}: {judged.text()}, {verdict}"
        + f" ({mean_std(gap)} vs {mean_std(base)} points); Mixed-Rand accuracy {mean_std(rand)} vs "
        f"{mean_std(base_rand)}, Original {mean_std(table[label].get('original', []))} vs "
        f"{mean_std(table[base_label].get('original', []))}."
    )
    if judged.verdict == "lower":  # a smaller gap: from recognising the foreground, or using the background less?
        rand_change = difference(rand, base_rand)
        doc.verdict(f"{label} vs {base_label}, Mixed-Rand accuracy (behind the smaller gap)", rand_change)
        if rand_change.verdict == "lower":
            line += (
                f" Its Mixed-Rand accuracy falls ({rand_change.text()}), so the smaller gap comes from "
                f"{label} using the background less, not from recognising the foreground better."
            )
        elif rand_change.verdict == "cannot tell":
            line += (
                f" These seeds cannot tell whether its Mixed-Rand accuracy rises ({rand_change.text()}), so "
                f"the smaller gap may come from {label} using the background less rather than recognising the "
                "foreground better."
            )
    return line


def table3(doc: Document, rows: list[dict[str, Any]], paper: dict[str, Any], roles: dict[str, str]) -> None:
    doc.heading("Table 3 – Feature similarity and decision consistency, ORIGINAL vs MIXED-RAND")
    ours = metric_table(rows, "analysis", "consistency")
    if not ours:
        doc.para("No consistency analysis in this run.")
        return
    paper_rows = {r["model"]: r["values"] for r in paper["rows"]}
    out = []
    for label in model_order(ours, roles):
        p = paper_rows.get(paper_name(label, roles))
        out.append(
            [
                label,
                mean_std(ours[label]["feature_similarity"], 3),
                mean_std(ours[label]["decision_consistency"], 3),
                f"{p[0]:.3f}" if p else "–",
                f"{p[1]:.3f}" if p else "–",
            ]
        )
    doc.table(
        [
            "Model",
            "Feature similarity (ours)",
            "Decision consistency (ours)",
            "Feature similarity (paper)",
            "Decision consistency (paper)",
        ],
        out,
    )
    doc.para(
        "Cosine similarity of the pooled backbone features, and the fraction of unchanged decisions, between "
        "the ORIGINAL and MIXED-RAND versions of every validation image (same foreground, random-class "
        "background)."
    )


def table4(
    doc: Document, table: dict[str, dict[str, list[float]]], paper: dict[str, Any], roles: dict[str, str]
) -> None:
    doc.heading("Table 4 – Dictionary negatives vs trivial negatives (%)")
    labels = played(roles, ("clad", "clad_trivial", "clad_plus", "clad_plus_trivial"))[0]
    if not ({"clad_trivial", "clad_plus_trivial"} & set(roles)):
        doc.para("No trivial-negative run (methods clad_trivial / clad_plus_trivial) in this configuration.")
        return
    rows = [["Ours", m, *[mean_std(table[m].get(c, [])) for c in TABLE2_COLUMNS]] for m in labels]
    rows += [["Paper", r["model"], *[f"{v:.1f}" for v in r["values"]]] for r in paper["rows"]]
    doc.table(["", "Model", *TABLE2_HEADER], rows)
    doc.para(
        "Trivial: one queue of recent positives (random backgrounds) shared by all anchors, instead of the "
        "queue of the anchor's background class."
    )


def table5(doc: Document, config: dict[str, Any], rows: list[dict[str, Any]], paper: dict[str, Any]) -> None:
    doc.heading("Table 5 – GrabCut vs U2-Net foreground segmentation (%)")
    per_run: dict[tuple[str, str], dict[str, list[float]]] = {}
    swept = sweep_only_experiments(config)
    for r in rows:
        exp = config["experiments"].get(r.get("experiment", ""))
        if r.get("kind") != "eval" or r["metric"] != "accuracy" or exp is None or r["experiment"] in swept:
            continue
        if exp["method"] not in CLAD_METHODS and r["experiment"] != "base_in9":
            continue
        seg = "-" if exp["method"] == "erm" else config["datasets"][exp["dataset"]]["segmentation"]["method"]
        per_run.setdefault((exp["label"], seg), {}).setdefault(r["variant"], []).append(r["value"])
    if not any(seg == "u2net" for _, seg in per_run):
        doc.para(
            "Not run: no U2-Net model is configured, so no CLAD / CLAD+ run trains on U2-Net masks. To fill "
            "this table, set `analyses.u2net_model` to the path of `u2netp.onnx` (4,574,861 bytes, md5 "
            "8e83ca70e441ab06c318d82300c84806; nothing is downloaded), e.g. "
            "`snakemake --cores 2 all --config analyses='{u2net_model: /path/u2netp.onnx}'`."
        )
        return
    out = [
        [
            "Ours",
            label,
            {"grabcut": "GrabCut", "u2net": "U2-Net"}.get(seg, seg),
            mean_std(v.get("original", [])),
            mean_std(v.get("mixed_rand", [])),
        ]
        for (label, seg), v in sorted(per_run.items())
    ]
    out += [["Paper", r["model"], r["segmentation"], *[f"{x:.1f}" for x in r["values"]]] for r in paper["rows"]]
    doc.table(["", "Model", "FG segmentation", "Original ↑", "Mixed-Rand ↑"], out)
    doc.para(
        "The segmentation is the one used to build the training set's masks and ONLY_BG_T backgrounds; "
        "every model is evaluated on the same GrabCut-built test variants."
    )


def table6(
    doc: Document, rows: list[dict[str, Any]], paper: dict[str, float], fraction: float, roles: dict[str, str]
) -> None:
    doc.heading("Table 6 – Accuracy drop (%) after corner cropping, ORIGINAL")
    ours = metric_table(rows, "analysis", "fivecrop")
    if not ours:
        doc.para("No FiveCrop analysis in this run.")
        return
    out = [
        [
            label,
            mean_std(ours[label]["accuracy_whole"]),
            mean_std(
                [
                    np.mean(v)
                    for v in zip(
                        *(
                            ours[label][f"accuracy_{c}"]
                            for c in ("top_left", "top_right", "bottom_left", "bottom_right")
                        )
                    )
                ]
            ),
            mean_std(ours[label]["accuracy_drop"]),
            f"{paper[paper_name(label, roles)]:.1f}" if paper_name(label, roles) in paper else "–",
        ]
        for label in model_order(ours, roles)
    ]
    doc.table(["Model", "Whole image", "Corner crops (mean of 4)", "Drop ↓ (ours)", "Drop ↓ (paper)"], out)
    doc.para(
        f"FiveCrop's four corner crops, side {fraction:g} of the image side, fed at their own size; the "
        "drop is the accuracy on whole images minus the mean accuracy over the four corners."
    )
