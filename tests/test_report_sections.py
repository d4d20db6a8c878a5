"""The CLAD and ReBias report sections on hand-made rows: numbers, verdicts and 'not run' notes."""

from training.reporting.clad_sections import bg_gap_verdict, table3, table5, table6
from training.reporting.document import Document
from training.reporting.rebias_sections import table1, table2, verdict


def _gap_table(base, clad):
    return {"Base (IN9)": {"bg_gap": base, "mixed_rand": [50.0] * len(base), "original": [90.0] * len(base)},
            "CLAD": {"bg_gap": clad, "mixed_rand": [60.0] * len(clad), "original": [89.0] * len(clad)}}


def test_bg_gap_verdict_follows_the_numbers():
    for base, clad, word in (([20.0, 22.0, 21.0], [5.0, 6.0, 4.0], "CLAD reduces"),
                             ([5.0, 6.0, 4.0], [20.0, 22.0, 21.0], "CLAD does not reduce"),
                             ([10.0, 14.0, 12.0], [11.0, 13.0, 12.5], "CLAD does not clearly change")):
        doc = Document("t")
        bg_gap_verdict(doc, _gap_table(base, clad))
        assert word in doc.markdown()
        # Mixed-Rand is 60 vs 50 here: the gap did not shrink by using the background less alone
        assert "using the background less" not in doc.markdown()
    table = _gap_table([20.0, 22.0, 21.0], [5.0, 6.0, 4.0])
    table["CLAD"]["mixed_rand"] = [50.0, 50.0, 50.0]
    doc = Document("t")
    bg_gap_verdict(doc, table)
    assert "using the background less, not from recognising the foreground better" in doc.markdown()


def test_table3_and_table6_show_ours_beside_the_paper():
    rows = [{"kind": "analysis", "analysis": "consistency", "label": "CLAD", "seed": s, "metric": m, "value": v}
            for s, (fs, dc) in enumerate(((0.9, 0.8), (0.7, 0.6))) for m, v in
            (("feature_similarity", fs), ("decision_consistency", dc))]
    rows += [{"kind": "analysis", "analysis": "fivecrop", "label": "CLAD", "seed": 0, "metric": f"accuracy_{k}",
              "value": v} for k, v in (("whole", 80.0), ("top_left", 70.0), ("top_right", 72.0),
                                       ("bottom_left", 74.0), ("bottom_right", 76.0), ("drop", 7.0))]
    doc = Document("t")
    table3(doc, rows, {"rows": [{"model": "CLAD", "values": [0.914, 0.915]}]})
    table6(doc, rows, {"CLAD": 4.5}, 0.875)
    md = doc.markdown()
    assert "| CLAD | 0.800 ± 0.141 | 0.700 ± 0.141 | 0.914 | 0.915 |" in md
    assert "| CLAD | 80.0 | 73.0 | 7.0 | 4.5 |" in md


def test_table5_says_when_u2net_is_not_configured(default_config):
    doc = Document("t")
    table5(doc, default_config, [], {"rows": []})
    assert "Not run" in doc.markdown() and "u2net_model" in doc.markdown()


GRID = {"train_variants": ["rho_0.99", "rho_0.999"],
        "methods": {"van": {"method": "vanilla"}, "reb": {"method": "rebias"}}}


def _verdict(acc):
    doc = Document("t")
    verdict(doc, GRID, acc)
    return doc.markdown()


def test_rebias_verdict_follows_the_numbers():
    acc = {("rho_0.999", "van", "biased"): [95.0, 97.0, 96.0], ("rho_0.999", "van", "unbiased"): [20.0, 22.0, 21.0],
           ("rho_0.999", "reb", "unbiased"): [40.0, 42.0, 41.0],
           ("rho_0.99", "van", "unbiased"): [60.0, 62.0, 61.0], ("rho_0.99", "reb", "unbiased"): [80.0, 82.0, 81.0]}
    text = _verdict(acc)
    assert "Vanilla reaches 61.0 ± 1.0 %" in text and "it learns the digits' shape" in text
    assert "predicts mostly from the colour" in text and "in this run? Yes." in text
    acc[("rho_0.99", "reb", "unbiased")] = [60.5, 61.5, 61.0]             # within the seed spread
    assert "in this run? Only at ρ = 0.999." in _verdict(acc)
    acc[("rho_0.999", "reb", "unbiased")] = [10.0, 11.0, 10.5]
    assert "in this run? No." in _verdict(acc)
    one_seed = {k: v[:1] for k, v in acc.items()}
    assert "Cannot tell from one seed" in _verdict(one_seed)


def test_rebias_verdict_is_not_informative_when_vanilla_learns_nothing_at_the_lowest_rho():
    acc = {("rho_0.99", "van", "unbiased"): [15.0, 16.0, 14.0], ("rho_0.99", "reb", "unbiased"): [40.0, 42.0, 41.0],
           ("rho_0.999", "van", "unbiased"): [10.0, 11.0, 9.0], ("rho_0.999", "reb", "unbiased"): [30.0, 31.0, 32.0]}
    text = _verdict(acc)
    assert "it does not learn the digits' shape" in text and "**not informative**" in text
    assert "in this run? Not informative" in text and "Yes" not in text
    acc[("rho_0.99", "van", "unbiased")] = [29.0, 30.0, 31.0]  # 30 = chance 10 + 20: just capable
    assert "in this run? Not informative" not in _verdict(acc)


def test_clad_verdict_is_not_informative_when_base_mr_does_not_recognise_the_foreground():
    table = _gap_table([20.0, 22.0, 21.0], [5.0, 6.0, 4.0])
    table["Base (MR)"] = {"only_fg": [14.0, 15.0, 16.0]}
    doc = Document("t")
    bg_gap_verdict(doc, table)
    text = doc.markdown()
    assert "Base (MR) reaches 15.0 ± 1.0 % on ONLY_FG" in text and "**not informative**" in text
    assert "CLAD reduces" not in text
    table["Base (MR)"] = {"only_fg": [70.0, 72.0, 71.0]}
    doc = Document("t")
    bg_gap_verdict(doc, table)
    assert "it learns to recognise the foreground" in doc.markdown() and "CLAD reduces" in doc.markdown()


def test_rebias_table2_without_runs_or_vgg_says_how_to_get_them(default_config):
    doc = Document("t")
    table2(doc, default_config, [], {})
    assert "config/imagenet9.yaml" in doc.markdown()
    cfg = {**default_config, "analyses": {**default_config["analyses"],
                                          "texture": {**default_config["analyses"]["texture"],
                                                      "experiments": ["base_in9"]}}}
    rows = [{"kind": "eval", "experiment": "base_in9", "seed": s, "metric": "accuracy", "variant": "original",
             "dataset": "in9", "value": v} for s, v in enumerate((50.0, 52.0))]
    rows.append({**rows[0], "dataset": "official", "value": 99.0})  # the official test images: not Table 2
    doc = Document("t")
    table2(doc, cfg, rows, {"erm": [1.0, 2.0]})
    assert "| Base (IN9) | 51.0 ± 1.4 | – | – | 1.0 | 2.0 |" in doc.markdown()
    assert "set `analyses.texture.vgg`" in doc.markdown()


def test_segmentation_summary_counts_xiao_et_al_grabcut_failures(tmp_path):
    import json

    from training.reporting.report import _segmentation

    base = {"area_fraction": 0.2, "box_source": "xml", "bg_t_status": "ok"}
    records = [{**base, "mask_status": "ok", "mask_box_fraction": 0.5},
               {**base, "mask_status": "ok", "mask_box_fraction": 0.05},       # under 10 % of its box
               {**base, "mask_status": "empty->box", "mask_box_fraction": 1.0}]  # GrabCut found nothing
    quality = tmp_path / "q.jsonl"
    quality.write_text("".join(json.dumps(r) + "\n" for r in records))
    doc = Document("t")
    _segmentation(doc, quality, tmp_path / "seg.png")
    assert "| 2 of 3 (66.7 %; 1 empty) |" in doc.markdown()


def test_table1_lists_the_papers_rows_beside_other_demo_rho():
    grid = {"dataset": "biased_mnist", "train_variants": ["rho_0.5", "rho_0.7"],
            "methods": {"vanilla": {"method": "vanilla", "label": "Vanilla"},
                        "rebias": {"method": "rebias", "label": "ReBias"}}}
    acc = {(v, k, t): [50.0] for v in grid["train_variants"] for k in grid["methods"] for t in ("biased", "unbiased")}
    paper = {"rebias_table1": {"columns": ["vanilla", "rebias"], "biased": {"0.99": [100.0, 100.0]},
                               "unbiased": {"0.99": [89.1, 88.1], "0.999": [10.4, 22.7]}}}
    doc = Document("t")
    table1(doc, "g", grid, acc, paper)
    md = doc.markdown()
    assert "| ρ = 0.5 | 50.0 | 50.0 |" in md and "| ρ = 0.7 | 50.0 | 50.0 |" in md
    assert "| ρ = 0.99 (paper) | 89.1 | 88.1 |" in md and "| ρ = 0.999 (paper) | 10.4 | 22.7 |" in md


def _ssl_config():
    exp = lambda method, label, **args: {"method": method, "dataset": "in9", "train_variant": "original",
                                         "label": label, "method_args": args}
    return {"experiments": {"moco": exp("moco_v2", "MoCo-v2"),
                            "moco_patch2": exp("moco_v2", "+ Patch", negative="patch", alpha=2.0),
                            "moco_patch3": exp("moco_v2", "+ Patch α3", negative="patch", alpha=3.0),
                            "byol": exp("byol", "BYOL"),
                            "base_in9": exp("erm", "Base (IN9)")}}


def _ssl_rows(patch_sims):
    rows = []
    for experiment, sim in zip(("moco", "moco_patch2", "moco_patch3"), patch_sims):
        for seed in (0, 1):
            rows += [{"kind": "eval", "experiment": experiment, "seed": seed, "metric": "similarity", "variant": pair,
                      "value": value} for pair, value in (("positive", 0.8), ("patch_negative", sim),
                                                          ("texture_negative", sim + 0.05))]
    return rows


def test_ssl_sections_table_capability_and_similarity_trend(tmp_path):
    import yaml
    from importlib import resources

    from training.reporting.ssl_sections import ssl_runs, ssl_sections

    config = _ssl_config()
    assert [r["experiment"] for r in ssl_runs(config)] == ["moco", "moco_patch2", "moco_patch3", "byol"]
    paper = yaml.safe_load(resources.files("training.reporting").joinpath("paper_numbers.yaml").read_text())
    cols = lambda acc: {"original": [acc, acc + 2], "stylized": [20.0, 21.0], "mixed_rand": [40.0, 41.0],
                        "sketch": [30.0, 30.5], "shape_bias": [30.0, 32.0]}
    table = {"MoCo-v2": cols(60.0), "+ Patch": cols(70.0), "+ Patch α3": cols(50.0), "BYOL": cols(55.0),
             "Base (IN9)": cols(90.0)}
    doc = Document("t")
    ssl_sections(doc, config, table, _ssl_rows([0.6, 0.5, 0.3]), paper, tmp_path)
    md = doc.markdown()
    assert "| + Patch (α = 2) | 71.0 ± 1.4 |" in md and "| Supervised – Base (IN9) | 91.0 ± 1.4 |" in md
    assert "| + Patch-based α = 2 | 79.35 |" in md                       # the paper's row, quoted
    assert "it learns the classes from self-supervised features" in md
    assert "original higher: +10.0 points" in md and "original lower: -10.0 points" in md
    assert "patch negative: 0.600 → 0.500 → 0.300 (falls as α rises)" in md
    assert (tmp_path / "ssl_similarity.png").stat().st_size > 0 and (tmp_path / "ssl_alpha_curve.png").stat().st_size > 0
    doc = Document("t")
    ssl_sections(doc, config, table, _ssl_rows([0.6, 0.7, 0.3]), paper, tmp_path)
    assert "(does not fall monotonically as α rises)" in doc.markdown()
    table["MoCo-v2"]["original"] = [12.0, 13.0]                           # at chance: no verdict
    doc = Document("t")
    ssl_sections(doc, config, table, [], paper, tmp_path)
    assert "**not informative**" in doc.markdown() and "original higher" not in doc.markdown()


def test_the_reports_config_slice_places_the_demos_ssl_runs_in_table_1_order(default_config):
    from training.reporting.ssl_sections import ssl_runs
    from workbench.config import resolve_config
    from workbench.slices import report_config

    runs = ssl_runs(report_config(resolve_config(default_config)))
    assert [(r["method"], r["negative"], r["alpha"]) for r in runs] == [
        ("moco_v2", "none", 2.0), ("moco_v2_texture", "texture", 2.0), ("moco_v2", "patch", 2.0),
        ("moco_v2", "patch", 3.0), ("byol", "none", 0.0), ("byol", "patch", 0.05)]


def _park(default_config):
    from workbench.config import resolve_config
    from workbench.slices import report_config

    return report_config(resolve_config(default_config))


def _park_rows(config, unbiased):
    """Curve and eval rows of every park_cmnist run: `unbiased(method key, percent, seed)` is the
    final test accuracy; an earlier point has a better valid accuracy and 5 points less."""
    rows = []
    for name, exp in config["experiments"].items():
        if exp.get("grid") != "park_cmnist":
            continue
        for seed in (0, 1, 2):
            final = unbiased(exp["grid_method"], float(exp["train_variant"].removeprefix("conflict_")), seed)
            tags = {"experiment": name, "seed": seed}
            rows += [{"kind": "curve", **tags, "step": 28, "metric": "valid_accuracy", "value": 99.0},
                     {"kind": "curve", **tags, "step": 28, "metric": "unbiased_accuracy", "value": final - 5},
                     {"kind": "eval", **tags, "variant": "valid", "metric": "accuracy", "value": 98.0},
                     {"kind": "eval", **tags, "variant": "unbiased", "metric": "accuracy", "value": final},
                     {"kind": "eval", **tags, "variant": "unbiased", "metric": "conflicting_accuracy", "value": final - 1}]
    return rows


def test_park_sections_select_on_valid_and_judge_from_the_numbers(default_config, tmp_path):
    import yaml

    from training.reporting.amplification_sections import _percent, amplification_sections, selected_and_oracle

    config = _park(default_config)
    paper = yaml.safe_load(open("training/reporting/paper_numbers.yaml"))
    score = {"vanilla": 40.0, "rebias": 41.0, "lff": 50.0, "lff_be": 55.0, "ours": 60.0}
    rows = _park_rows(config, lambda key, p, seed: score[key] + p + seed)
    cells = selected_and_oracle(rows, config, "park_cmnist", "accuracy")
    assert cells[("conflict_5", "ours")] == {"selected": [60.0, 61.0, 62.0], "oracle": [65.0, 66.0, 67.0]}
    doc = Document("t")
    amplification_sections(doc, config, rows, paper, tmp_path)
    md = doc.markdown()
    assert "| Ours (Park et al.) | 56.5 ± 1.0 | 57.0 ± 1.0 | 58.0 ± 1.0 | 61.0 ± 1.0 |" in md   # validation-selected
    assert "| Ours (Park et al.) | 61.5 ± 1.0 | 62.0 ± 1.0 | 63.0 ± 1.0 | 66.0 ± 1.0 |" in md   # oracle
    assert "| Ours | 63.64 |" in md and "it learns the classes beyond their bias" in md
    assert "Vanilla reaches 45.0 ± 1.0 % on the bias-conflicting samples" in md   # the final point (no curve row)
    assert "against LfF+BE: 0.5 %: higher: +5.0 points" in md
    assert "val split (colours independent of the digit" in md
    assert "over 3 seeds (Vanilla, LfF+BE, Ours (Park et al.)), 1 seed (ReBias, LfF)" in md
    assert _percent("conflict_0.5") == 0.5 and _percent("bg_conflict_2") == 2.0   # IN-9's variants too
    rows = _park_rows(config, lambda key, p, seed: 12.0 if key == "vanilla" else score[key])
    doc = Document("t")
    amplification_sections(doc, config, rows, paper, tmp_path)
    assert "**not informative**" in doc.markdown() and "against LfF+BE" not in doc.markdown()
