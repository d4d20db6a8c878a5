"""The report: CLAD Table 2 layout (ours beside the paper's), Fig. 5 scatter, the texture-bias
tables, a grid of every variant, the segmentation quality summary and the dataset manifests.

Reads only tidy metric rows (JSON lines) and the dataset stores; writes `report.md`,
`report.html`, `metrics.csv` (all rows, aggregated) and PNG figures into `out_dir`.
"""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from importlib import resources
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import yaml  # noqa: E402
import zarr  # noqa: E402

from core.atomic import atomic_path  # noqa: E402

from . import amplification_sections, clad_sections, rebias_sections, ssl_sections, texture_sections  # noqa: E402
from .document import Document  # noqa: E402
from .helpers import (by_label, experiment_labels, mean_std, metric_table, model_order, read_rows,  # noqa: E402
                      save_figure, sweep_only_experiments)

TABLE2_COLUMNS, TABLE2_HEADER = clad_sections.TABLE2_COLUMNS, clad_sections.TABLE2_HEADER


def accuracy_table(rows: list[dict[str, Any]], labels: dict[str, str]) -> dict[str, dict[str, list[float]]]:
    """{model label: {variant or "bg_gap": [value per seed]}} from eval rows, aggregated per
    experiment and shown under its label (`labels`: experiment -> label).

    BG-GAP = acc(MIXED_SAME) - acc(MIXED_RAND), computed per seed, then aggregated.
    """
    per_run: dict[tuple[str, int], dict[str, float]] = defaultdict(dict)
    for r in rows:  # BG-GAP rows of the runs are recomputed here from the accuracies they derive from
        if r.get("kind") == "eval" and r["metric"] == "accuracy":
            per_run[(r["experiment"], r["seed"])][r["variant"]] = r["value"]
    table: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for (experiment, _seed), accs in sorted(per_run.items()):
        for variant, value in accs.items():
            table[experiment][variant].append(value)
        if "mixed_same" in accs and "mixed_rand" in accs:
            table[experiment]["bg_gap"].append(accs["mixed_same"] - accs["mixed_rand"])
    return by_label(table, labels)


def build_report(config: dict[str, Any], metric_files: list[Path], quality_file: Path, manifest_files: list[Path],
                 stores: dict[str, Path], out_dir: Path, saliency_arrays: Path | None = None) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    all_rows = read_rows(metric_files)
    labels = experiment_labels(config)
    for r in all_rows:  # rows carry no labels: display names come from this report's config
        if "experiment" in r:
            r["label"] = labels.get(r["experiment"], r["experiment"])
    official = config["evaluation"].get("official_dataset")
    is_official = lambda r: official is not None and r.get("dataset") == official  # noqa: E731
    is_grid = lambda r: config["experiments"].get(r.get("experiment", ""), {}).get("grid")  # noqa: E731
    # runs scored on a dataset of their own (`eval_dataset`, ImageNet-100) fill their own Table 1 only
    elsewhere: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in all_rows:
        if (r.get("kind") == "eval" and not is_grid(r)
                and r.get("dataset") not in (None, config["evaluation"]["dataset"], official)):
            elsewhere[r["dataset"]].append(r)
    scored_elsewhere = frozenset(r["experiment"] for d_rows in elsewhere.values() for r in d_rows)
    rows = [r for r in all_rows if not is_grid(r) and not is_official(r)
            and not (r.get("kind") == "eval" and r.get("experiment") in scored_elsewhere)]
    table = accuracy_table(rows, labels)
    # sweep runs appear in their own figures only
    swept = {config["experiments"][e]["label"] for e in sweep_only_experiments(config)}
    main = {label: cols for label, cols in table.items() if label not in swept}
    paper = yaml.safe_load(resources.files("training.reporting").joinpath("paper_numbers.yaml").read_text())
    doc = Document("Debiasing workbench report")
    if config.get("smoke"):
        doc.para("**Smoke run** (`smoke: true`, workbench/smoke.py): every configured run at its real shapes with "
                 "counts shrunk to a few images, one seed and one short epoch. It shows that the workflow runs; "
                 "its numbers are not results, and the capability checks and verdicts below, computed as in a "
                 "real run, rest on a handful of images each: read none of them.")
    ds = config["datasets"][config["evaluation"]["dataset"]]
    n_seeds = len(config["seeds"])
    doc.para(f"Data source: `{ds['source']['kind']}`, {ds['image_size']}×{ds['image_size']} px, "
             f"segmentation {ds['segmentation']['method']}; backbone {config['training']['arch']}, "
             f"{config['training']['epochs']} epochs; our rows are mean ± sample std over {n_seeds} seed(s) "
             f"{config['seeds']}. Rows marked (paper) are quoted from the CLAD paper's Table 2 (ResNet-50 "
             "on real ImageNet-9): compare the *pattern*, not the values, when the data source is synthetic.")

    _table2(doc, main, paper["clad_table2"])
    clad_sections.bg_gap_verdict(doc, main)
    _official(doc, official, accuracy_table([r for r in all_rows if is_official(r)], labels))
    _all_variants(doc, main, ds["variants"])
    _scatter(doc, main, paper["clad_table2"], out_dir / "fig5_mixed_same_vs_rand.png")
    clad_sections.table3(doc, rows, paper["clad_table3"])
    clad_sections.table4(doc, main, paper["clad_table4"])
    clad_sections.table5(doc, config, rows, paper["clad_table5"])
    clad_sections.table6(doc, rows, paper["clad_table6"], config["analyses"]["fivecrop_fraction"])
    clad_sections.figure6(doc, config, rows, saliency_arrays, out_dir)
    clad_sections.sweep_figures(doc, config, table, out_dir)
    # shape bias per seed where it counts enough decisions, else their number (texture_sections.shape_bias_table)
    shape_bias = {label: cols for label, cols in texture_sections.shape_bias_table(rows, labels).items()
                  if label in main}
    with_bias = {label: {**cols, **shape_bias.get(label, {})} for label, cols in main.items()}
    texture_sections.texture_sections(doc, config, with_bias, paper, stores, out_dir)
    ssl_sections.ssl_sections(doc, config, with_bias, rows, paper, out_dir, scored_elsewhere=scored_elsewhere)
    other_tables = {dataset: accuracy_table(d_rows, labels) for dataset, d_rows in sorted(elsewhere.items())}
    for dataset, d_table in other_tables.items():
        ssl_sections.dataset_sections(doc, config, dataset, d_table, elsewhere[dataset], paper, out_dir)
    rebias_sections.rebias_sections(doc, config, all_rows, paper, out_dir)
    amplification_sections.amplification_sections(doc, config, all_rows, paper, out_dir)
    _variant_grid(doc, stores, config["report"]["grid_images"], out_dir / "variant_grid.png")
    _segmentation(doc, quality_file, out_dir / "segmentation_quality.png")
    _manifests(doc, manifest_files, set(config["datasets"]) - {config["evaluation"]["dataset"]})
    _training(doc, rows)

    with atomic_path(out_dir / "metrics.csv") as tmp:
        with open(tmp, "w", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(["source", "model", "metric", "mean", "std", "n_seeds", "values"])
            sources = [("eval", table), ("shape_bias", {label: {"shape_bias": cols["shape_bias"]}
                                                        for label, cols in shape_bias.items() if cols["shape_bias"]}),
                       *((a, metric_table(rows, "analysis", a))
                                         for a in ("consistency", "fivecrop", "saliency", "texture")),
                       *((f"eval:{dataset}", d_table) for dataset, d_table in other_tables.items())]
            for name in config.get("grids", {}):
                grid_table: dict[str, dict[str, list[float]]] = defaultdict(dict)
                for (variant, key, test_set), values in rebias_sections.grid_accuracies(all_rows, name).items():
                    grid_table[f"{key} {variant}"][test_set] = values
                sources.append((f"grid:{name}", grid_table))
            for source, label, cols in ((src, label, cols) for src, t in sources for label, cols in sorted(t.items())):
                for metric, values in sorted(cols.items()):
                    writer.writerow([source, label, metric, f"{np.mean(values):.4f}",
                                     f"{np.std(values, ddof=1) if len(values) > 1 else 0.0:.4f}", len(values),
                                     " ".join(f"{v:.4f}" for v in values)])
    for name, text in (("report.md", doc.markdown()), ("report.html", doc.html())):
        with atomic_path(out_dir / name) as tmp:
            tmp.write_text(text)


def _table2(doc: Document, table, paper: dict[str, Any]) -> None:
    doc.heading("Table 2 – Background Challenge accuracy (%)")
    rows = [["Ours (this run)", *row] for row in _model_rows(table, TABLE2_COLUMNS)]
    for prow in paper["rows"]:
        rows.append([f"{prow['type']} (paper)", prow["model"],
                     *["–" if v is None else f"{v:.1f}" for v in prow["values"]]])
    doc.table(["Type", "Model", *TABLE2_HEADER], rows)
    gaps = {label: np.mean(table[label]["bg_gap"]) for label in table if table[label].get("bg_gap")}
    if "Base (IN9)" in gaps and "Base (MR)" in gaps:
        doc.para(f"BG-GAP of Base (IN9) here: {gaps['Base (IN9)']:.1f} points; of Base (MR): {gaps['Base (MR)']:.1f} "
                 "points. A positive gap means the model gains accuracy from a background of the right class; a "
                 "negative one that it does better on random backgrounds (Base (MR) is trained on MIXED_RAND-style "
                 "composites, so MIXED_RAND is its own training distribution).")


def _model_rows(table, columns: list[str]) -> list[list[str]]:
    """One row per model (in report order): its label and mean ± std of each column."""
    return [[label, *[mean_std(table[label].get(c, [])) for c in columns]] for label in model_order(table)]


def _official(doc: Document, official: str | None, table) -> None:
    """Table 2's columns on the official Background Challenge test images, read as released."""
    doc.heading("Background Challenge, official test images (%)")
    if official is None:
        doc.para("Not scored: point a `bg_challenge` dataset at the released `bg_challenge/` folder and set "
                 "`evaluation.official_dataset` to it to score every model on the authors' test images as well as on "
                 "the variants regenerated here.")
        return
    doc.para(f"The same models on dataset `{official}`: the released test images read as they are (resized to the "
             "models' input size), without our segmentation or compositing.")
    doc.table(["Model", *TABLE2_HEADER], _model_rows(table, TABLE2_COLUMNS))


def _all_variants(doc: Document, table, variants: list[str]) -> None:
    doc.heading("Accuracy on every variant (%)")
    doc.table(["Model", *variants], _model_rows(table, variants))


def _scatter(doc: Document, table, paper: dict[str, Any], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(5.5, 5))
    col = paper["columns"]
    for prow in paper["rows"]:
        same, rand = prow["values"][col.index("mixed_same")], prow["values"][col.index("mixed_rand")]
        if same is not None and rand is not None:
            ax.scatter(same, rand, marker="x", color="grey")
            if prow["type"] != "Others":  # naming every prior method makes the cluster unreadable
                ax.annotate(prow["model"], (same, rand), fontsize=6, color="grey")
    for label in model_order(table):
        same, rand = table[label].get("mixed_same"), table[label].get("mixed_rand")
        if same and rand:
            ax.errorbar(np.mean(same), np.mean(rand), xerr=np.std(same), yerr=np.std(rand), fmt="o", capsize=3,
                        label=f"{label} (ours)")
    lo = min([*ax.get_xlim(), *ax.get_ylim()])
    ax.plot([lo, 100], [lo, 100], "--", color="black", linewidth=0.8, label="identity (no background bias)")
    ax.set_xlabel("MIXED-SAME accuracy (%)")
    ax.set_ylabel("MIXED-RAND accuracy (%)")
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title("Fig. 5: MIXED-SAME vs MIXED-RAND (grey x: paper)")
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    doc.heading("Fig. 5 – MIXED-SAME vs MIXED-RAND")
    doc.image(path.name, "Models nearer the identity line have less background bias; grey crosses are the paper's "
                         "models (real IN-9), dots ours (mean ± std over seeds).")


def _variant_grid(doc: Document, stores: dict[str, Path], n_images: int, path: Path) -> None:
    columns = []
    for variant, store in stores.items():
        images = zarr.open_group(str(store), mode="r")["val/images"]
        idx = np.linspace(0, images.shape[0] - 1, n_images).astype(int)
        columns.append(images.get_orthogonal_selection((idx,)))
    fig, axes = plt.subplots(n_images, len(columns), figsize=(1.3 * len(columns), 1.3 * n_images + 0.4),
                             squeeze=False)
    for j, (variant, images) in enumerate(zip(stores, columns)):
        for i in range(n_images):
            axes[i][j].imshow(images[i], interpolation="nearest")
            axes[i][j].axis("off")
        axes[0][j].set_title(variant, fontsize=7)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    doc.heading("Every variant of the same validation images")
    doc.image(path.name, "Rows: validation images; columns: the dataset variants built by the workflow.")


def _segmentation(doc: Document, quality_file: Path, path: Path) -> None:
    records = read_rows([quality_file])
    done = [r for r in records if "skipped" not in r]
    doc.heading("Segmentation quality")
    if not done:
        doc.para("No image was segmented.")
        return
    area = np.array([r["area_fraction"] for r in done])
    ious = np.array([r["iou"] for r in done if "iou" in r])
    count = lambda key: ", ".join(f"{k}: {v}" for k, v in sorted(_counts(done, key).items()))  # noqa: E731
    summary = [["images segmented", str(len(done))], ["images skipped", str(len(records) - len(done))],
               ["mask area fraction (median, 5%–95%)",
                f"{np.median(area):.3f} ({np.percentile(area, 5):.3f}–{np.percentile(area, 95):.3f})"],
               ["mask status", count("mask_status")], ["box source", count("box_source")],
               ["ONLY_BG_T status", count("bg_t_status")]]
    with_box = [r for r in done if "mask_box_fraction" in r]
    if with_box:  # GrabCut's own mask: an empty one was replaced by the box afterwards
        empty = sum(r["mask_status"] == "empty->box" for r in with_box)
        failed = empty + sum(r["mask_status"] != "empty->box" and r["mask_box_fraction"] < 0.1 for r in with_box)
        summary.append(["masks under 10 % of their box (Xiao et al. dropped these images; here empty masks fall "
                        "back to the box and small ones are kept)",
                        f"{failed} of {len(with_box)} ({100 * failed / len(with_box):.1f} %; {empty} empty)"])
    if ious.size:
        summary += [["IoU vs true masks (mean / median)", f"{ious.mean():.3f} / {np.median(ious):.3f}"],
                    ["images with IoU < 0.5", f"{(ious < 0.5).sum()} of {ious.size}"]]
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


def _counts(records: list[dict[str, Any]], key: str) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for r in records:
        out[str(r.get(key))] += 1
    return out


def _manifests(doc: Document, manifest_files: list[Path], other_datasets: set[str]) -> None:
    doc.heading("Datasets: images in = images out + skipped")
    rows, skipped = [], {}
    for path in manifest_files:
        variant = Path(path).name.removesuffix(".manifest.json")
        if Path(path).parent.name in other_datasets:  # another dataset's store (ImageNet-100's): named with it
            variant = f"{Path(path).parent.name}/{variant}"
        manifest = json.loads(Path(path).read_text())
        for split, m in sorted(manifest.items()):
            rows.append([variant, split, str(m["inputs"]), str(m["outputs"]), str(len(m["skipped"]))])
            for item in m["skipped"]:
                skipped.setdefault(item["id"], item["reason"])
    doc.table(["Variant", "Split", "Inputs", "Outputs", "Skipped"], rows)
    if skipped:
        doc.para(f"{len(skipped)} item(s) skipped; the first ones (see the *.manifest.json files for all):")
        doc.table(["Item", "Reason"], [[k, v] for k, v in list(skipped.items())[:20]])


def _training(doc: Document, rows: list[dict[str, Any]]) -> None:
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
    doc.table(["Experiment", *metrics],
              [[e, *[f"{np.mean(final[(e, m)]):.4g}" if final.get((e, m)) else "–" for m in metrics]]
               for e in experiments])
