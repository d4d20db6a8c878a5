"""Report sections about the data and the runs themselves: every variant of the same images, the
segmentation quality, the manifests (images in = images out + skipped), the training metrics."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib.pyplot as plt
import numpy as np
import zarr

from debias_workbench.pipeline.fingerprint import FILE as FINGERPRINT_FILE
from debias_workbench.pipeline.segment_stage import QUALITY_COUNTS

from ..helpers import read_rows, save_figure

if TYPE_CHECKING:
    from ..context import ReportContext
    from ..document import Document


def variant_grid(doc: Document, ctx: ReportContext) -> None:
    stores, n_images, path = ctx.stores, ctx.config["report"]["grid_images"], ctx.out_dir / "variant_grid.png"
    columns = []
    for store in stores.values():
        images = zarr.open_group(str(store), mode="r")["val/images"]
        idx = np.linspace(0, images.shape[0] - 1, n_images).astype(int)
        columns.append(images.get_orthogonal_selection((idx,)))
    fig, axes = plt.subplots(n_images, len(columns), figsize=(1.3 * len(columns), 1.3 * n_images + 0.4), squeeze=False)
    for j, (variant, images) in enumerate(zip(stores, columns)):
        for i in range(n_images):
            axes[i][j].imshow(images[i], interpolation="nearest")
            axes[i][j].axis("off")
        axes[0][j].set_title(variant, fontsize=7)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    doc.heading("Every variant of the same validation images")
    doc.image(path.name, "Rows: validation images; columns: the dataset variants built by the workflow.")


def segmentation_quality(doc: Document, ctx: ReportContext) -> None:
    segmentation(doc, ctx.quality_file, ctx.out_dir / "segmentation_quality.png")


def segmentation(doc: Document, quality_file: Path, path: Path) -> None:
    records = read_rows([quality_file])
    done = [r for r in records if "skipped" not in r]
    doc.heading("Segmentation quality")
    if not done:
        doc.para("No image was segmented.")
        return
    area = np.array([r["area_fraction"] for r in done])
    ious = np.array([r["iou"] for r in done if "iou" in r])
    count = lambda key: ", ".join(f"{k}: {v}" for k, v in sorted(counts(done, key).items()))  # noqa: E731
    summary = [
        ["images segmented", str(len(done))],
        ["images skipped", str(len(records) - len(done))],
        [
            "mask area fraction (median, 5%–95%)",
            f"{np.median(area):.3f} ({np.percentile(area, 5):.3f}–{np.percentile(area, 95):.3f})",
        ],
        *([title, count(field)] for field, title in QUALITY_COUNTS.items()),
    ]
    with_box = [r for r in done if "mask_box_fraction" in r]
    if with_box:  # GrabCut's own mask: an empty one was replaced by the box afterwards
        empty = sum(r["mask_status"] == "empty->box" for r in with_box)
        failed = empty + sum(r["mask_status"] != "empty->box" and r["mask_box_fraction"] < 0.1 for r in with_box)
        summary.append(
            [
                "masks under 10 % of their box (Xiao et al. dropped these images; here empty masks fall "
                "back to the box and small ones are kept)",
                f"{failed} of {len(with_box)} ({100 * failed / len(with_box):.1f} %; {empty} empty)",
            ]
        )
    if ious.size:
        summary += [
            ["IoU vs true masks (mean / median)", f"{ious.mean():.3f} / {np.median(ious):.3f}"],
            ["images with IoU < 0.5", f"{(ious < 0.5).sum()} of {ious.size}"],
        ]
    else:
        summary.append(["IoU vs true masks", "no true masks in this source"])
    doc.table(["Quantity", "Value"], summary)
    fig, axes = plt.subplots(1, 2 if ious.size else 1, figsize=(8 if ious.size else 4, 3), squeeze=False)
    axes[0][0].hist(area, bins=30, color="tab:blue")
    axes[0][0].set_xlabel("foreground mask area fraction")
    if ious.size:
        axes[0][1].hist(ious, bins=30, color="tab:green")
        axes[0][1].set_xlabel("IoU with the true mask")
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    doc.image(path.name, "Distribution of mask area fraction (and IoU against true masks where the source has them).")


def counts(records: list[dict[str, Any]], key: str) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for r in records:
        out[str(r.get(key))] += 1
    return out


def manifests(doc: Document, ctx: ReportContext) -> None:
    """Every manifest's counts and its store's fingerprint; another dataset's variants named with it."""
    other_datasets = set(ctx.config["datasets"]) - {ctx.config["evaluation"]["dataset"]}
    doc.heading("Datasets: images in = images out + skipped")
    doc.para(
        "Fingerprint: the first 16 hex digits of the store's content digest (`fingerprint.json` in the store: "
        "SHA-256 over its decoded values in row order and its attributes, whatever its chunking or codec); "
        "equal fingerprints mean equal datasets, and `workbench verify STORE` checks a copy against it."
    )
    rows: list[list[str]] = []
    skipped: dict[str, str] = {}  # item id -> why it was skipped
    for path in ctx.manifest_files:
        name = Path(path).name.removesuffix(".manifest.json")
        variant = name
        if Path(path).parent.name in other_datasets:  # another dataset's store (ImageNet-100's): named with it
            variant = f"{Path(path).parent.name}/{variant}"
        manifest = json.loads(Path(path).read_text())
        digest = store_fingerprint(Path(path).parent / f"{name}.zarr")
        for split, m in sorted(manifest.items()):
            rows.append([variant, split, str(m["inputs"]), str(m["outputs"]), str(len(m["skipped"])), digest])
            for item in m["skipped"]:
                skipped.setdefault(item["id"], item["reason"])
    doc.table(["Variant", "Split", "Inputs", "Outputs", "Skipped", "Fingerprint"], rows)
    if skipped:
        doc.para(f"{len(skipped)} item(s) skipped; the first ones (see the *.manifest.json files for all):")
        doc.table(["Item", "Reason"], [[k, v] for k, v in list(skipped.items())[:20]])


def training(doc: Document, ctx: ReportContext) -> None:
    """The last epoch's training metrics of every run, mean over seeds."""
    rows: list[dict[str, Any]] = ctx.rows
    final: dict[tuple[str, str], list[float]] = defaultdict(list)
    last_epoch: dict[tuple[str, int], int] = {}
    for r in rows:
        if r.get("kind") == "train":
            key = (r["experiment"], r["seed"])
            last_epoch[key] = max(last_epoch.get(key, -1), r["epoch"])
    for r in rows:
        if r.get("kind") == "train" and r["epoch"] == last_epoch[(r["experiment"], r["seed"])]:
            final[(r["experiment"], r["metric"])].append(r["value"])
    if not final:
        return
    metrics = sorted({m for _, m in final})
    experiments = sorted({e for e, _ in final})
    doc.heading("Training (last epoch, mean over seeds)")
    doc.table(
        ["Experiment", *metrics],
        [[e, *[f"{np.mean(final[(e, m)]):.4g}" if final.get((e, m)) else "–" for m in metrics]] for e in experiments],
    )


def store_fingerprint(store: Path) -> str:
    """The first 16 hex digits of a store's fingerprint, "none" for a store without one."""
    path = store / FINGERPRINT_FILE
    return f"`{json.loads(path.read_text())['digest'][:16]}`" if path.is_file() else "none"
