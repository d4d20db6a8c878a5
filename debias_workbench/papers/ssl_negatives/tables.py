"""Report sections of the non-semantic negatives (Ge et al., NeurIPS 2021): Table 1 in the paper's
layout (our linear-probe accuracies on the IN-9 test sets, the paper's ImageNet-100 numbers
quoted beneath), the capability line on plain MoCo-v2, a verdict computed from the numbers, the
similarity of the anchors to their positive and negatives (Figs. 2-3) and the alpha curve (Fig. 6), both
drawn by `figures`.
Runs scored on another dataset (`eval_dataset`: ImageNet-100, the paper's own) get Table 1 of
their own with the paper's rows beside ours, column for column (`dataset_sections`)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from debias_workbench.core.statistics import difference
from debias_workbench.pipeline.datasets import family_name, get_family, train_photos
from debias_workbench.report.document import Document
from debias_workbench.report.helpers import capability_line, failed_check, mean_std, value_cell

from .figures import alpha_curve_section, similarity_section, similarity_table
from .runs import display, ssl_runs

COLUMNS = ["original", "corrupted", "stylized", "texture", "sketch", "mixed_rand", "bg_gap", "shape_bias"]
HEADER = [
    "Original ↑",
    "IN-9-C ↑",
    "Stylized IN-9 ↑",
    "IN-9-Texture",
    "Sketch (stand-in) ↑",
    "Mixed-Rand ↑",
    "BG-GAP ↓",
    "Shape bias (%)",
]
OOD = ("corrupted", "stylized", "sketch", "mixed_rand")
#: Table 1 on a dataset of the paper's own kind (ImageNet-100): our variant, its header, and the
#: paper's column it sits under (numbers.yaml `ge_table1`; None: a column of ours alone)
PAPER_COLUMNS = [
    ("original", "ImageNet-100 val ↑", "ImageNet"),
    ("corrupted", "-C ↑", "ImageNet-C"),
    ("imagenet_sketch", "ImageNet-S ↑", "ImageNet-S"),
    ("stylized", "Stylized ↑", "Stylized-ImageNet"),
    ("imagenet_r", "ImageNet-R ↑", "ImageNet-R"),
    ("texture", "-Texture", None),
]


def ssl_sections(
    doc: Document,
    config: dict[str, Any],
    table: dict[str, dict[str, list[float]]],
    rows: list[dict[str, Any]],
    paper: dict[str, Any],
    out_dir: Path,
    roles: dict[str, str],
    chance: float = 100 / 9,
    scored_elsewhere: frozenset[str] = frozenset(),
) -> None:
    """The section of the runs scored on the evaluation dataset (IN-9): every self-supervised
    experiment but those in `scored_elsewhere` (their `eval_dataset` is another one)."""
    runs = [r for r in ssl_runs(config) if r["experiment"] not in scored_elsewhere]
    if not runs:
        return
    doc.heading("Non-semantic negatives – Ge et al. (NeurIPS 2021), Table 1")
    lrs = " / ".join(f"{lr:g}" for lr in sorted({r["probe_lr"] for r in runs}))
    doc.para(
        "Self-supervised pre-training on the training images, then a linear probe on the frozen backbone "
        f"(SGD lr {lrs} (the paper: 10), batch 128, 60 epochs, ×0.1 at 30/40/50, on features computed once "
        "without augmentation); the "
        "probe's accuracy on each test set. Patch negatives are made anew each step from the stored image, "
        "texture "
        "negatives are the images' IN-9-Texture copies, both in the colours of the query view (Sec. 3.3); MoCo-v2 "
        "uses shuffled batch norm (split BN over a permuted key batch on one device). The OOD sets here are "
        "IN-9-C (each val image under one of the 19 ImageNet-C corruptions × 5 severities, balanced per class: "
        "the column estimates ImageNet-C's mean accuracy), Stylized IN-9, the sketch stand-in and the "
        "Background Challenge's Mixed-Rand; the paper's ImageNet-S and -R are not available offline."
    )
    # value_cell: a shape bias from too few decisions shows as such, not as a number
    body = [[display(r), *[value_cell(table.get(r["label"], {}), c) for c in COLUMNS]] for r in runs]
    supervised = roles.get("base_in9")
    if supervised in table:
        body.append([f"Supervised – {supervised}", *[value_cell(table[supervised], c) for c in COLUMNS]])
    doc.table(["Model (ours, linear probe)", *HEADER], body)
    cols = paper["ge_table1"]["columns"]
    doc.table(
        ["Model (paper, ImageNet-100, ResNet-50)", *cols],
        [[p["model"], *[f"{v:.2f}" for v in p["values"]]] for p in paper["ge_table1"]["rows"]],
    )
    named = [(r["experiment"], display(r)) for r in runs]
    named += [(e, f"Supervised – {supervised}") for e, x in config["experiments"].items() if x["label"] == supervised]
    _severity_table(doc, named, rows)
    _probe_fit(doc, runs, rows, chance)
    _verdict(doc, runs, table, chance)
    sims = similarity_table(rows)
    similarity_section(doc, runs, sims, paper["ge_similarity"], out_dir / "ssl_similarity.png")
    alpha_curve_section(doc, runs, table, out_dir / "ssl_alpha_curve.png")


def dataset_sections(
    doc: Document,
    config: dict[str, Any],
    dataset: str,
    table: dict[str, dict[str, list[float]]],
    rows: list[dict[str, Any]],
    paper: dict[str, Any],
    out_dir: Path,
    train_rows: Sequence[dict[str, Any]] = (),
) -> None:
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
    doc.para(_dataset_intro(dataset, ds_cfg))
    body = [
        ["Ours (this run)", display(r), *[value_cell(table.get(r["label"], {}), v) for v, _, _ in columns]]
        for r in runs
    ]
    body += _paper_rows(paper["ge_table1"], columns)
    doc.table(["Type", "Model (ResNet-50, linear probe)", *[h for _, h, _ in columns]], body)
    doc.para(_table1_caption(runs, [c for v, _, c in PAPER_COLUMNS if c and v not in built]))
    _severity_table(doc, [(r["experiment"], display(r)) for r in runs], rows, f"{name}-C")
    _probe_fit(doc, runs, list(train_rows), 100 / len(ds_cfg["classes"]))
    _verdict(doc, runs, table, 100 / len(ds_cfg["classes"]), [v for v, _, c in columns[1:] if c])
    similarity_section(
        doc,
        runs,
        similarity_table(rows),
        paper["ge_similarity"],
        out_dir / f"ssl_similarity_{dataset}.png",
        f" on {name}",
        f"{name}-Texture",
    )
    doc.para(
        f"No shape bias or Fig. 6 (shape bias against α) on {name}: its Stylized set is made with class-free "
        "style images, so no stylized image is a cue conflict between two classes."
    )


def _dataset_intro(dataset: str, ds_cfg: dict[str, Any]) -> str:
    """What Table 1 on `dataset` shows: the runs, how they were trained and scored, and how each test set
    was made, against what the paper's columns hold."""
    return (
        f"The self-supervised runs whose `eval_dataset` is `{dataset}` ({len(ds_cfg['classes'])} classes, "
        f"{ds_cfg['image_size']} px, source `{ds_cfg['source']['kind']}`): pre-training on its training split"
        f"{photo_views(ds_cfg)}, then the linear probe on the frozen backbone; top-1 accuracy (%) of its "
        f"{len(ds_cfg['classes'])}-way argmax on each test set. -C: each val image under one ImageNet-C "
        "(corruption, severity) pair, the pairs "
        "balanced per class (the paper's ImageNet-C column is the mean over the 5 severities of all images). "
        "Stylized: the val images AdaIN-stylized with the configured style images. ImageNet-S / -R: the images "
        "of this dataset's classes in your ImageNet-Sketch / ImageNet-R folders, scored over all "
        f"{len(ds_cfg['classes'])} classes (ImageNet-R holds only some of them; its manifest counts the rest). "
        "Columns this dataset does not build are left out; rows marked (paper) are the paper's Table 1."
    )


def _paper_rows(table1: dict[str, Any], columns: list[tuple[str, str, str | None]]) -> list[list[str]]:
    """The paper's Table 1 rows (numbers.yaml `ge_table1`, marked `(paper)`) under our `columns`: its value
    (± its std where it gives one) in each column it has, – under a column of ours alone."""
    cols = table1["columns"]
    body = []
    for prow in table1["rows"]:
        std = prow.get("std")
        cells = [
            "–"
            if c is None
            else f"{prow['values'][cols.index(c)]:.2f}" + (f" ± {std[cols.index(c)]:.2f}" if std and c else "")
            for _, _, c in columns
        ]
        body.append(["(paper)", prow["model"], *cells])
    return body


def photo_views(ds_cfg: dict[str, Any]) -> str:
    """Where the pre-training views are cut from, for the caption, under `train_views: photo` (else nothing)."""
    if not (photos := train_photos(ds_cfg)):
        return ""
    return (
        f" (views cut from each whole photo, stored squashed to {photos.side} px with its aspect: `{photos.SETTING}`)"
    )


def _table1_caption(runs: list[dict[str, Any]], missing: list[str]) -> str:
    """Under Table 1: which probe ran, how -C was drawn, and the paper's columns this run lacks."""
    augmented = {r["probe_augment"] for r in runs}
    probe = (
        "fresh crop-and-flip views every epoch, as the authors' main_lincls.py"
        if augmented == {True}
        else "features of the unaugmented training images, computed once (the authors augment every epoch)"
        if augmented == {False}
        else "augmented for some rows, cached features for others (see each run's config)"
    )
    text = (
        f"Linear probe: {probe}. -C: one (corruption, severity) pair per image, where the released ImageNet-C "
        "scores every image under all 75, so this column rests on about 1/75 of the paper's scored images."
    )
    if missing:
        text += (
            f" No {' / '.join(missing)} column: its folder is not given (`datasets.<dataset>.external`: "
            "imagenet_sketch / imagenet_r), so those columns of the paper are not reproduced here."
        )
    return text


def _severity_table(
    doc: Document, named: list[tuple[str, str]], rows: list[dict[str, Any]], name: str = "IN-9-C"
) -> None:
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
        doc.para(
            f"**Probe not fitted:** {named}: the linear probe ends with a training loss no lower than that of "
            "predicting the class shares, so these accuracies do not measure the features: either the runs' "
            "`method_args.probe_lr` is too high for them, or they hold no class information (collapse)."
        )


def _verdict(
    doc: Document,
    runs: list[dict[str, Any]],
    table: dict[str, dict[str, list[float]]],
    chance: float,
    ood: tuple[str, ...] | list[str] = OOD,
) -> None:
    plain = next((r for r in runs if r["method"] == "moco_v2" and r["negative"] == "none"), None)
    if plain is None:
        doc.para(
            "Capability check: no plain MoCo-v2 run in this configuration, so whether the probe learns the "
            "classes at all is unknown; no verdict."
        )
        return
    base, task = table.get(plain["label"], {}), "the classes from self-supervised features"
    capable, line = capability_line(
        plain["label"], "with its linear probe on Original val", base.get("original", []), chance, task
    )
    doc.para(line)
    pairs = _references(runs, plain)
    if not capable:
        for r, ref in pairs:
            doc.no_verdict(
                f"{display(r)} vs {ref['label']}, probe accuracy",
                failed_check(plain["label"], base.get("original", []), chance, task),
            )
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
