"""Report sections of the non-semantic negatives (Ge et al., NeurIPS 2021): Table 1 in the paper's
layout (our linear-probe accuracies on the IN-9 test sets, the paper's ImageNet-100 numbers
quoted beneath), the capability line on plain MoCo-v2, a verdict computed from the numbers, the
similarity of the anchors to their positive and negatives (Figs. 2-3) and the alpha curve (Fig. 6).
Runs scored on another dataset (`eval_dataset`: ImageNet-100, the paper's own) get Table 1 of
their own with the paper's rows beside ours, column for column (`dataset_sections`)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from debias_workbench.core.statistics import difference, run_value
from debias_workbench.pipeline.datasets import family_name, get_family
from debias_workbench.report.document import Document
from debias_workbench.report.helpers import capability_line, failed_check, mean_std, save_figure, value_cell

from .runs import ssl_runs

COLUMNS = ["original", "corrupted", "stylized", "texture", "sketch", "mixed_rand", "bg_gap", "shape_bias"]
HEADER = ["Original ↑", "IN-9-C ↑", "Stylized IN-9 ↑", "IN-9-Texture", "Sketch (stand-in) ↑", "Mixed-Rand ↑",
          "BG-GAP ↓", "Shape bias (%)"]
OOD = ("corrupted", "stylized", "sketch", "mixed_rand")
PAIRS = {"positive": "positive", "standard_negative": "standard negative", "patch_negative": "patch negative",
         "texture_negative": "texture negative"}
#: Table 1 on a dataset of the paper's own kind (ImageNet-100): our variant, its header, and the
#: paper's column it sits under (numbers.yaml `ge_table1`; None: a column of ours alone)
PAPER_COLUMNS = [("original", "ImageNet-100 val ↑", "ImageNet"), ("corrupted", "-C ↑", "ImageNet-C"),
                 ("imagenet_sketch", "ImageNet-S ↑", "ImageNet-S"), ("stylized", "Stylized ↑", "Stylized-ImageNet"),
                 ("imagenet_r", "ImageNet-R ↑", "ImageNet-R"), ("texture", "-Texture", None)]


def similarity_table(rows: list[dict[str, Any]]) -> dict[str, dict[str, list[float]]]:
    """{experiment: {pair: [mean cosine similarity per seed]}} from the eval rows."""
    out: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in sorted(rows, key=lambda r: (r.get("experiment", ""), r.get("seed", 0))):
        if r.get("kind") == "eval" and r["metric"] == "similarity":
            out[r["experiment"]][r["variant"]].append(run_value(r))
    return out


def ssl_sections(doc: Document, config: dict[str, Any], table: dict[str, dict[str, list[float]]],
                 rows: list[dict[str, Any]], paper: dict[str, Any], out_dir: Path, roles: dict[str, str],
                 chance: float = 100 / 9, scored_elsewhere: frozenset[str] = frozenset()) -> None:
    """The section of the runs scored on the evaluation dataset (IN-9): every self-supervised
    experiment but those in `scored_elsewhere` (their `eval_dataset` is another one)."""
    runs = [r for r in ssl_runs(config) if r["experiment"] not in scored_elsewhere]
    if not runs:
        return
    doc.heading("Non-semantic negatives – Ge et al. (NeurIPS 2021), Table 1")
    lrs = " / ".join(f"{lr:g}" for lr in sorted({r["probe_lr"] for r in runs}))
    doc.para("Self-supervised pre-training on the training images, then a linear probe on the frozen backbone "
             f"(SGD lr {lrs} (the paper: 10), batch 128, 60 epochs, ×0.1 at 30/40/50, on features computed once "
             "without augmentation); the "
             "probe's accuracy on each test set. Patch negatives are made anew each step from the stored image, "
             "texture "
             "negatives are the images' IN-9-Texture copies, both in the colours of the query view (Sec. 3.3); MoCo-v2 "
             "uses shuffled batch norm (split BN over a permuted key batch on one device). The OOD sets here are "
             "IN-9-C (each val image under one of the 19 ImageNet-C corruptions × 5 severities, balanced per class: "
             "the column estimates ImageNet-C's mean accuracy), Stylized IN-9, the sketch stand-in and the "
             "Background Challenge's Mixed-Rand; the paper's ImageNet-S and -R are not available offline.")
    # value_cell: a shape bias from too few decisions shows as such, not as a number
    body = [[display(r), *[value_cell(table.get(r["label"], {}), c) for c in COLUMNS]] for r in runs]
    supervised = roles.get("base_in9")
    if supervised in table:
        body.append([f"Supervised – {supervised}", *[value_cell(table[supervised], c) for c in COLUMNS]])
    doc.table(["Model (ours, linear probe)", *HEADER], body)
    cols = paper["ge_table1"]["columns"]
    doc.table(["Model (paper, ImageNet-100, ResNet-50)", *cols],
              [[p["model"], *[f"{v:.2f}" for v in p["values"]]] for p in paper["ge_table1"]["rows"]])
    named = [(r["experiment"], display(r)) for r in runs]
    named += [(e, f"Supervised – {supervised}") for e, x in config["experiments"].items() if x["label"] == supervised]
    _severity_table(doc, named, rows)
    _probe_fit(doc, runs, rows, chance)
    _verdict(doc, runs, table, chance)
    sims = similarity_table(rows)
    _similarity(doc, runs, sims, paper["ge_similarity"], out_dir / "ssl_similarity.png")
    _alpha_curve(doc, runs, table, out_dir / "ssl_alpha_curve.png")


def dataset_sections(doc: Document, config: dict[str, Any], dataset: str, table: dict[str, dict[str, list[float]]],
                     rows: list[dict[str, Any]], paper: dict[str, Any], out_dir: Path,
                     train_rows: Sequence[dict[str, Any]] = ()) -> None:
    """Ge et al. Table 1 for the runs scored on `dataset` (their `eval_dataset`, e.g. ImageNet-100):
    `table` and `rows` hold only that dataset's numbers (`train_rows`: the runs' training rows, for
    the probe's fit). Our rows and the paper's share the columns
    the dataset builds (`PAPER_COLUMNS`); then the severity table, the capability line and verdict,
    and the similarities. The shape bias and Fig. 6 need styles with a class (`styles.kind: flat`
    has none)."""
    scored = {r["experiment"] for r in rows if r.get("kind") == "eval"}
    runs = [r for r in ssl_runs(config) if r["experiment"] in scored]
    if not runs:
        return
    ds_cfg = config["datasets"][dataset]
    built = get_family(family_name(ds_cfg)).variants(ds_cfg)
    name = "ImageNet-100" if len(ds_cfg["classes"]) == 100 else f"`{dataset}`"
    columns = [(v, h if not h.startswith("-") else f"{name}{h}", c) for v, h, c in PAPER_COLUMNS if v in built]
    doc.heading(f"Non-semantic negatives – Ge et al. (NeurIPS 2021), Table 1 on {name} (dataset `{dataset}`)")
    doc.para(f"The self-supervised runs whose `eval_dataset` is `{dataset}` ({len(ds_cfg['classes'])} classes, "
             f"{ds_cfg['image_size']} px, source `{ds_cfg['source']['kind']}`): pre-training on its training split"
             f"{photo_views(ds_cfg)}, then the linear probe on the frozen backbone; top-1 accuracy (%) of its "
             f"{len(ds_cfg['classes'])}-way argmax on each test set. -C: each val image under one ImageNet-C "
             "(corruption, severity) pair, the pairs "
             "balanced per class (the paper's ImageNet-C column is the mean over the 5 severities of all images). "
             "Stylized: the val images AdaIN-stylized with the configured style images. ImageNet-S / -R: the images "
             "of this dataset's classes in your ImageNet-Sketch / ImageNet-R folders, scored over all "
             f"{len(ds_cfg['classes'])} classes (ImageNet-R holds only some of them; its manifest counts the rest). "
             "Columns this dataset does not build are left out; rows marked (paper) are the paper's Table 1.")
    body = [["Ours (this run)", display(r), *[value_cell(table.get(r["label"], {}), v) for v, _, _ in columns]]
            for r in runs]
    cols = paper["ge_table1"]["columns"]
    for prow in paper["ge_table1"]["rows"]:
        std = prow.get("std")
        body.append(["(paper)", prow["model"],
                     *[("–" if c is None else f"{prow['values'][cols.index(c)]:.2f}"
                        + (f" ± {std[cols.index(c)]:.2f}" if std and c else "")) for _, _, c in columns]])
    doc.table(["Type", "Model (ResNet-50, linear probe)", *[h for _, h, _ in columns]], body)
    doc.para(_table1_caption(runs, [c for v, _, c in PAPER_COLUMNS if c and v not in built]))
    _severity_table(doc, [(r["experiment"], display(r)) for r in runs], rows, f"{name}-C")
    _probe_fit(doc, runs, list(train_rows), 100 / len(ds_cfg["classes"]))
    _verdict(doc, runs, table, 100 / len(ds_cfg["classes"]), [v for v, _, c in columns[1:] if c])
    _similarity(doc, runs, similarity_table(rows), paper["ge_similarity"], out_dir / f"ssl_similarity_{dataset}.png",
                f" on {name}", f"{name}-Texture")
    doc.para(f"No shape bias or Fig. 6 (shape bias against α) on {name}: its Stylized set is made with class-free "
             "style images, so no stylized image is a cue conflict between two classes.")


def photo_views(ds_cfg: dict[str, Any]) -> str:
    """Where the pre-training views are cut from, for the caption, under `train_views: photo` (else nothing)."""
    if ds_cfg.get("train_views") != "photo":
        return ""
    return (f" (views cut from each whole photo, stored squashed to {ds_cfg['view_source_size']} px with its aspect: "
            "`train_views: photo`)")


def _table1_caption(runs: list[dict[str, Any]], missing: list[str]) -> str:
    """Under Table 1: which probe ran, how -C was drawn, and the paper's columns this run lacks."""
    augmented = {r["probe_augment"] for r in runs}
    probe = ("fresh crop-and-flip views every epoch, as the authors' main_lincls.py" if augmented == {True} else
             "features of the unaugmented training images, computed once (the authors augment every epoch)"
             if augmented == {False} else "augmented for some rows, cached features for others (see each run's config)")
    text = (f"Linear probe: {probe}. -C: one (corruption, severity) pair per image, where the released ImageNet-C "
            "scores every image under all 75, so this column rests on about 1/75 of the paper's scored images.")
    if missing:
        text += (f" No {' / '.join(missing)} column: its folder is not given (`datasets.<dataset>.external`: "
                 "imagenet_sketch / imagenet_r), so those columns of the paper are not reproduced here.")
    return text


def _severity_table(doc: Document, named: list[tuple[str, str]], rows: list[dict[str, Any]],
                    name: str = "IN-9-C") -> None:
    """`name` (IN-9-C) accuracy per severity (mean over seeds) of each (experiment, label) in
    `named`, as ImageNet-C's accuracy-vs-severity curves."""
    found: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if r.get("kind") == "eval" and r["metric"] == "severity_accuracy":
            found[r["experiment"]][r["severity"]].append(r["value"])
    if not found:
        return
    severities = sorted({s for per in found.values() for s in per})
    body = [[label, *[mean_std(found[exp].get(s, [])) for s in severities]] for exp, label in named if exp in found]
    doc.table([f"{name} accuracy (%) by severity", *[str(s) for s in severities]], body)


def _probe_fit(doc: Document, runs: list[dict[str, Any]], rows: list[dict[str, Any]], chance: float) -> None:
    """Name the runs whose linear probe ended fitting its own training rows no better than the
    class shares do (training loss >= the class-prior loss, `SelfSupervised.finish`; for runs
    trained before that was recorded, >= log(100 / chance) = log(classes), at least the prior
    loss): their accuracies do not measure the features."""
    final: dict[tuple[str, int], dict[str, float]] = defaultdict(dict)
    for r in rows:
        if r.get("kind") == "train" and r["metric"] in ("probe_loss", "probe_prior_loss"):
            final[(r["experiment"], r["seed"])][r["metric"]] = r["value"]
    labels = {r["experiment"]: r["label"] for r in runs}
    unfit = defaultdict(list)
    for (exp, seed), v in sorted(final.items()):
        if exp in labels and "probe_loss" in v and v["probe_loss"] >= v.get("probe_prior_loss", math.log(100 / chance)):
            unfit[labels[exp]].append(str(seed))
    if unfit:
        named = "; ".join(f"{label} (seed {', '.join(seeds)})" for label, seeds in unfit.items())
        doc.para(f"**Probe not fitted:** {named}: the linear probe ends with a training loss no lower than that of "
                 "predicting the class shares, so these accuracies do not measure the features: either the runs' "
                 "`method_args.probe_lr` is too high for them, or they hold no class information (collapse).")


def _verdict(doc: Document, runs: list[dict[str, Any]], table: dict[str, dict[str, list[float]]],
             chance: float, ood: tuple[str, ...] | list[str] = OOD) -> None:
    plain = next((r for r in runs if r["method"] == "moco_v2" and r["negative"] == "none"), None)
    if plain is None:
        doc.para("Capability check: no plain MoCo-v2 run in this configuration, so whether the probe learns the "
                 "classes at all is unknown; no verdict.")
        return
    base, task = table.get(plain["label"], {}), "the classes from self-supervised features"
    capable, line = capability_line(plain["label"], "with its linear probe on Original val", base.get("original", []),
                                    chance, task)
    doc.para(line)
    pairs = _references(runs, plain)
    if not capable:
        for r, ref in pairs:
            doc.no_verdict(f"{display(r)} vs {ref['label']}, probe accuracy",
                           failed_check(plain["label"], base.get("original", []), chance, task))
        doc.para("Do non-semantic negatives improve MoCo-v2 here? Not informative.")
        return
    lines = []
    for r, ref in pairs:
        ours, theirs = table.get(r["label"], {}), table.get(ref["label"], {})
        parts = []
        for c in ("original", *ood):
            judged = difference(ours.get(c, []), theirs.get(c, []))
            doc.verdict(f"{display(r)} vs {ref['label']}, {c} probe accuracy", judged)
            parts.append(f"{c} {judged.text()}")
        lines.append(f"{display(r)} vs {ref['label']}: " + "; ".join(parts) + ".")
    doc.para("Against the same method without non-semantic negatives (accuracy, points): " + " ".join(lines))


def _references(runs: list[dict[str, Any]], plain: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(run, its reference) for each run with non-semantic negatives: the same method without them (`plain`,
    MoCo-v2's, or BYOL's); the references themselves are not compared."""
    byol = next((b for b in runs if b["method"] == "byol" and b["negative"] == "none"), None)
    pairs = [(r, plain if r["method"].startswith("moco") else byol) for r in runs if r["negative"] != "none"]
    return [(r, ref) for r, ref in pairs if ref is not None]


def display(run: dict[str, Any]) -> str:
    """The run's label, with its alpha when it uses a negative and its label does not say it."""
    if run["negative"] == "none" or "α" in run["label"]:
        return run["label"]
    return f"{run['label']} (α = {run['alpha']:g})"


def _similarity(doc: Document, runs: list[dict[str, Any]], sims: dict[str, dict[str, list[float]]],
                paper: dict[str, dict[int, float]], path: Path, where: str = "", texture: str = "IN-9-Texture") -> None:
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
    doc.image(path.name, "Mean cosine similarity, on the val images, between an aug-plus view's embedding and that "
                         "of another view (positive), a view of another image (standard negative), its patch negative "
                         f"and its {texture} image.")
    doc.table(["Model", *[PAIRS[p] for p in pairs]],
              [[display(r),
                *[mean_std(sims[r["experiment"]].get(p, []), 3) for p in pairs]] for r in present])
    moco = [r for r in present if r["method"] == "moco_v2"]
    if len(moco) > 1:
        alphas = [0.0 if r["negative"] == "none" else r["alpha"] for r in moco]
        order = np.argsort(alphas, kind="stable")
        lines = []
        for pair in ("patch_negative", "texture_negative"):
            values = [float(np.mean(sims[moco[i]["experiment"]].get(pair, [np.nan]))) for i in order]
            if any(np.isnan(values)):
                continue
            falls = all(b < a for a, b in zip(values, values[1:]))
            lines.append(f"{PAIRS[pair]}: " + " → ".join(f"{v:.3f}" for v in values)
                         + (" (falls as α rises)" if falls else " (does not fall monotonically as α rises)"))
        if lines:
            doc.para(f"MoCo-v2 with patch negatives at α = {', '.join(f'{alphas[i]:g}' for i in order)}: "
                     + "; ".join(lines) + ". The paper (ImageNet-100, α = 0, 2, 3): patch "
                     + " → ".join(f"{v:.3f}" for v in paper["patch_negative"].values()) + ", texture "
                     + " → ".join(f"{v:.3f}" for v in paper["texture_negative"].values()) + ".")


def _alpha_curve(doc: Document, runs: list[dict[str, Any]], table: dict[str, dict[str, list[float]]],
                 path: Path) -> None:
    moco = [r for r in runs if r["method"] == "moco_v2" and r["label"] in table]
    if len(moco) < 2:
        return
    alphas = [0.0 if r["negative"] == "none" else r["alpha"] for r in moco]
    order = np.argsort(alphas, kind="stable")
    fig, ax = plt.subplots(figsize=(5, 3.2))
    for column, style in (("shape_bias", "o-"), ("original", "s--"), ("stylized", "^:")):
        ys = [table[moco[i]["label"]].get(column, []) for i in order]
        ax.errorbar([alphas[i] for i in order], [float(np.mean(y)) if y else np.nan for y in ys],
                    yerr=[float(np.std(y, ddof=1)) if len(y) > 1 else 0.0 for y in ys], fmt=style, capsize=3,
                    label={"shape_bias": "shape bias (%)", "original": "Original accuracy (%)",
                           "stylized": "Stylized IN-9 accuracy (%)"}[column])
    ax.set_xlabel("α (0 = no patch negative)")
    ax.set_ylim(0, 100)
    ax.legend(fontsize=7, frameon=False)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    doc.heading("Shape bias against α (Fig. 6)")
    doc.image(path.name, "MoCo-v2 with patch negatives: shape bias on the cue-conflict images and probe accuracies, "
                         "per α (mean over seeds, bars: sample std).")
