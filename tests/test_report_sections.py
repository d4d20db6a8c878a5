"""The CLAD and ReBias report sections on hand-made rows: numbers, verdicts and 'not run' notes."""

from debias_workbench.core.statistics import RunValue
from debias_workbench.papers.clad.tables import bg_gap_verdict, table3, table5, table6
from debias_workbench.papers.paper import load_numbers
from debias_workbench.papers.rebias.tables import table1, table2, verdict
from debias_workbench.report.document import Document
from debias_workbench.report.roles import all_roles

#: every role played by the experiment the papers name it after (the demo config's labels)
PAPER_ROLES = {role: model.paper_name for role, model in all_roles().items()}


def _gap_table(base, clad):
    return {"Base (IN9)": {"bg_gap": base, "mixed_rand": [50.0] * len(base), "original": [90.0] * len(base)},
            "CLAD": {"bg_gap": clad, "mixed_rand": [60.0] * len(clad), "original": [89.0] * len(clad)}}


def test_bg_gap_verdict_follows_the_numbers():
    for base, clad, word in (([20.0, 22.0, 21.0], [5.0, 6.0, 4.0], "so CLAD reduces the gap"),
                             ([5.0, 6.0, 4.0], [20.0, 22.0, 21.0], "so CLAD widens the gap"),
                             ([10.0, 14.0, 12.0], [11.0, 13.0, 12.5], "cannot tell whether CLAD changes the gap")):
        doc = Document("t")
        bg_gap_verdict(doc, _gap_table(base, clad), None, PAPER_ROLES)
        assert word in doc.markdown()
        # Mixed-Rand is 60 vs 50 here: the gap did not shrink by using the background less alone
        assert "using the background less" not in doc.markdown()
    table = _gap_table([20.0, 22.0, 21.0], [5.0, 6.0, 4.0])
    table["CLAD"]["mixed_rand"] = [40.0, 41.0, 39.0]   # falls against 50: the gap shrank by using the background less
    doc = Document("t")
    bg_gap_verdict(doc, table, None, PAPER_ROLES)
    assert "Its Mixed-Rand accuracy falls (lower: -10.0 points" in doc.markdown()
    assert "using the background less, not from recognising the foreground better" in doc.markdown()
    table["CLAD"]["mixed_rand"] = [43.0, 62.0, 50.0]   # +1.7 with a wide spread: the seeds cannot tell
    doc = Document("t")
    bg_gap_verdict(doc, table, None, PAPER_ROLES)
    assert "These seeds cannot tell whether its Mixed-Rand accuracy rises (cannot tell: +1.7 points" in doc.markdown()
    assert "may come from CLAD using the background less" in doc.markdown() and "falls" not in doc.markdown()


def test_bg_gap_verdict_is_drawn_on_the_official_images_where_given():
    """The paper's Table 2 is on Xiao et al.'s released test images: where the runs were scored on
    them, the verdict is theirs (here they reverse the regenerated images' verdict), and the report
    says which images it used."""
    regenerated, official = _gap_table([20.0, 22.0, 21.0], [5.0, 6.0, 4.0]), _gap_table([5.0, 6.0, 4.0], [20.0, 22.0, 21.0])
    doc = Document("t")
    bg_gap_verdict(doc, regenerated, official, PAPER_ROLES)
    assert "drawn on the official Background Challenge test images" in doc.markdown()
    assert "so CLAD widens the gap" in doc.markdown()
    doc = Document("t")
    bg_gap_verdict(doc, regenerated, {}, PAPER_ROLES)
    assert "drawn on the Mixed-Same / Mixed-Rand images regenerated here" in doc.markdown()
    assert "so CLAD reduces the gap" in doc.markdown()


def test_bg_gap_verdict_comes_from_the_confidence_interval():
    """One seed each: no seed spread, so "cannot tell" whatever the difference; with three seeds
    the 95 % interval of the difference (Welch's t here: the table's values carry no seeds) decides."""
    doc = Document("t")
    bg_gap_verdict(doc, _gap_table([8.1], [5.0]), None, PAPER_ROLES)
    text = doc.markdown()
    assert ("CLAD vs Base (IN9): cannot tell: -3.1 points (one seed on a side: seed spread unknown, 1 vs 1 seeds)"
            in text)
    assert "reduces" not in text and "using the background less" not in text
    doc = Document("t")
    bg_gap_verdict(doc, _gap_table([20.0, 22.0, 21.0], [5.0, 6.0, 4.0]), None, PAPER_ROLES)
    assert ("CLAD vs Base (IN9): lower: -16.0 points (95 % CI -18.3 to -13.7, 3 vs 3 seeds), so CLAD reduces the gap"
            in doc.markdown())
    doc = Document("t")
    bg_gap_verdict(doc, _gap_table([5.0, 6.0, 4.0], [20.0, 22.0, 21.0]), None, PAPER_ROLES)
    assert "higher: +16.0 points (95 % CI +13.7 to +18.3, 3 vs 3 seeds), so CLAD widens the gap" in doc.markdown()


def test_table3_and_table6_show_ours_beside_the_paper():
    rows = [{"kind": "analysis", "analysis": "consistency", "label": "CLAD", "seed": s, "metric": m, "value": v}
            for s, (fs, dc) in enumerate(((0.9, 0.8), (0.7, 0.6))) for m, v in
            (("feature_similarity", fs), ("decision_consistency", dc))]
    rows += [{"kind": "analysis", "analysis": "fivecrop", "label": "CLAD", "seed": 0, "metric": f"accuracy_{k}",
              "value": v} for k, v in (("whole", 80.0), ("top_left", 70.0), ("top_right", 72.0),
                                       ("bottom_left", 74.0), ("bottom_right", 76.0), ("drop", 7.0))]
    doc = Document("t")
    table3(doc, rows, {"rows": [{"model": "CLAD", "values": [0.914, 0.915]}]}, PAPER_ROLES)
    table6(doc, rows, {"CLAD": 4.5}, 0.875, PAPER_ROLES)
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
    acc[("rho_0.99", "reb", "unbiased")] = [60.5, 61.5, 61.0]             # inside the interval
    assert "in this run? Higher only at ρ = 0.999." in _verdict(acc)
    acc[("rho_0.999", "reb", "unbiased")] = [10.0, 11.0, 10.5]
    assert "in this run? No: lower at ρ = 0.999, cannot tell elsewhere." in _verdict(acc)
    acc[("rho_0.99", "reb", "unbiased")] = [50.0, 51.0, 50.5]
    assert "in this run? No: lower at every ρ." in _verdict(acc)
    one_seed = {k: [RunValue(v[0], 0, 1.0)] for k, v in acc.items()}  # one run each, 1 point of test-image error
    assert "in this run? Cannot tell." in _verdict(one_seed)


def test_rebias_verdict_comes_from_the_confidence_interval():
    acc = {("rho_0.99", "van", "unbiased"): [60.0, 62.0, 61.0], ("rho_0.99", "reb", "unbiased"): [80.0, 82.0, 81.0],
           ("rho_0.999", "van", "unbiased"): [30.0, 32.0, 31.0], ("rho_0.999", "reb", "unbiased"): [25.0, 27.0, 26.0]}
    text = _verdict(acc)
    assert "ρ = 0.99: higher: +20.0 points (95 % CI +17.7 to +22.3, 3 vs 3 seeds)" in text
    assert "ρ = 0.999: lower: -5.0 points (95 % CI -7.3 to -2.7" in text and "in this run? Higher only at ρ = 0.99." in text
    text = _verdict({k: [RunValue(v[0], 0, 1.0)] for k, v in acc.items()})
    assert "ρ = 0.99: cannot tell: +20.0 points (one seed on a side" in text and "in this run? Cannot tell." in text


def test_rebias_verdict_is_not_informative_when_vanilla_learns_nothing_at_the_lowest_rho():
    acc = {("rho_0.99", "van", "unbiased"): [15.0, 16.0, 14.0], ("rho_0.99", "reb", "unbiased"): [40.0, 42.0, 41.0],
           ("rho_0.999", "van", "unbiased"): [10.0, 11.0, 9.0], ("rho_0.999", "reb", "unbiased"): [30.0, 31.0, 32.0]}
    text = _verdict(acc)
    assert "it does not learn the digits' shape" in text and "**not informative**" in text
    assert "in this run? Not informative" in text and "Yes" not in text
    acc[("rho_0.99", "van", "unbiased")] = [29.0, 30.0, 31.0]  # mean 30 = chance 10 + 20, but its interval straddles it
    text = _verdict(acc)
    assert "cannot tell whether it learns the digits' shape" in text and "in this run? Not informative" in text
    acc[("rho_0.99", "van", "unbiased")] = [34.0, 35.0, 36.0]  # interval 32.5 to 37.5: wholly above 30
    assert "in this run? Not informative" not in _verdict(acc)


def test_clad_verdict_is_not_informative_when_base_mr_does_not_recognise_the_foreground():
    table = _gap_table([20.0, 22.0, 21.0], [5.0, 6.0, 4.0])
    table["Base (MR)"] = {"only_fg": [14.0, 15.0, 16.0]}
    doc = Document("t")
    bg_gap_verdict(doc, table, None, PAPER_ROLES)
    text = doc.markdown()
    assert "Base (MR) reaches 15.0 ± 1.0 % on ONLY_FG" in text and "**not informative**" in text
    assert "CLAD reduces" not in text
    table["Base (MR)"] = {"only_fg": [70.0, 72.0, 71.0]}
    doc = Document("t")
    bg_gap_verdict(doc, table, None, PAPER_ROLES)
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
    assert "set `analyses.texture.vgg16`" in doc.markdown() and "`analyses.texture.vgg` to" in doc.markdown()


def test_rebias_table2_names_the_texture_network(default_config):
    texture = {**default_config["analyses"]["texture"], "experiments": ["base_in9"], "vgg": "vgg_normalised.pth"}
    for extra, network in (({}, "the normalised VGG-19's conv3_3, standing in for the authors' VGG16 conv3_3"),
                           ({"vgg16": "vgg16-397923af.pth"}, "VGG16 conv3_3 (torchvision's ImageNet weights")):
        doc = Document("t")
        table2(doc, {**default_config, "analyses": {**default_config["analyses"], "texture": {**texture, **extra}}},
               [], {})
        assert f"L2-normalised Gram features of {network}" in doc.markdown()


def test_segmentation_summary_counts_xiao_et_al_grabcut_failures(tmp_path):
    import json

    from debias_workbench.report.sections.datasets import segmentation as _segmentation

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
    from debias_workbench.papers.ssl_negatives.runs import ssl_runs
    from debias_workbench.papers.ssl_negatives.tables import ssl_sections

    config = _ssl_config()
    assert [r["experiment"] for r in ssl_runs(config)] == ["moco", "moco_patch2", "moco_patch3", "byol"]
    paper = load_numbers("debias_workbench.papers.ssl_negatives")
    cols = lambda acc: {"original": [acc, acc + 2], "stylized": [20.0, 21.0], "mixed_rand": [40.0, 41.0],
                        "sketch": [30.0, 30.5], "shape_bias": [30.0, 32.0]}
    table = {"MoCo-v2": cols(60.0), "+ Patch": cols(70.0), "+ Patch α3": cols(50.0), "BYOL": cols(55.0),
             "Base (IN9)": cols(90.0)}
    doc = Document("t")
    ssl_sections(doc, config, table, _ssl_rows([0.6, 0.5, 0.3]), paper, tmp_path, PAPER_ROLES)
    md = doc.markdown()
    assert "| + Patch (α = 2) | 71.0 ± 1.4 |" in md and "| Supervised – Base (IN9) | 91.0 ± 1.4 |" in md
    assert "| + Patch-based α = 2 | 79.35 |" in md                       # the paper's row, quoted
    assert "it learns the classes from self-supervised features" in md
    assert "original higher: +10.0 points" in md and "original lower: -10.0 points" in md
    assert "patch negative: 0.600 → 0.500 → 0.300 (falls as α rises)" in md
    assert (tmp_path / "ssl_similarity.png").stat().st_size > 0 and (tmp_path / "ssl_alpha_curve.png").stat().st_size > 0
    doc = Document("t")
    ssl_sections(doc, config, table, _ssl_rows([0.6, 0.7, 0.3]), paper, tmp_path, PAPER_ROLES)
    assert "(does not fall monotonically as α rises)" in doc.markdown()
    table["MoCo-v2"]["original"] = [12.0, 13.0]                           # at chance: no verdict
    doc = Document("t")
    ssl_sections(doc, config, table, [], paper, tmp_path, PAPER_ROLES)
    assert "**not informative**" in doc.markdown() and "original higher" not in doc.markdown()


def test_the_reports_config_slice_places_the_demos_ssl_runs_in_table_1_order(default_config):
    from debias_workbench.papers.ssl_negatives.runs import ssl_runs
    from debias_workbench.workflow.config import resolve_config
    from debias_workbench.workflow.report_slice import report_config
    from debias_workbench.workflow.slices import config_provenance

    config = resolve_config(default_config)
    runs = ssl_runs(report_config(config, config_provenance(config, ["config/config.yaml"], {})))
    assert [(r["method"], r["negative"], r["alpha"]) for r in runs] == [
        ("moco_v2", "none", 2.0), ("moco_v2_texture", "texture", 2.0), ("moco_v2", "patch", 2.0),
        ("moco_v2", "patch", 3.0), ("byol", "none", 0.0), ("byol", "patch", 0.05)]


def _park(default_config):
    from debias_workbench.workflow.config import resolve_config
    from debias_workbench.workflow.report_slice import report_config
    from debias_workbench.workflow.slices import config_provenance

    config = resolve_config(default_config)
    return report_config(config, config_provenance(config, ["config/config.yaml"], {}))


def _park_rows(config, unbiased, grid="park_cmnist"):
    """Curve and eval rows of every run of `grid`: `unbiased(method key, percent, seed)` is the
    final test accuracy; an earlier point has a better valid accuracy and 5 points less."""
    rows = []
    for name, exp in config["experiments"].items():
        if exp.get("grid") != grid:
            continue
        for seed in (0, 1, 2):
            final = unbiased(exp["grid_method"], float(exp["train_variant"].removeprefix("conflict_")), seed)
            tags = {"experiment": name, "seed": seed}
            rows += [{"kind": "curve", **tags, "step": 28, "metric": "valid_accuracy", "value": 99.0},
                     {"kind": "curve", **tags, "step": 28, "metric": "unbiased_accuracy", "value": final - 5},
                     {"kind": "eval", **tags, "variant": "valid", "metric": "accuracy", "value": 98.0},
                     {"kind": "eval", **tags, "variant": "unbiased", "metric": "accuracy", "value": final},
                     {"kind": "eval", **tags, "variant": "unbiased", "metric": "conflicting_accuracy", "value": final - 1},
                     {"kind": "eval", **tags, "variant": "unbiased", "metric": "worst_group_accuracy",
                      "value": final - 20, "n": 8 + seed, "se": 2.0}]
    return rows


def test_park_sections_select_on_valid_and_judge_from_the_numbers(default_config, tmp_path):
    from debias_workbench.papers.park.grid_results import percent, selected_and_oracle
    from debias_workbench.papers.park.tables import amplification_sections
    from debias_workbench.workflow.config import deep_merge

    four_ratios = {"datasets": {"colored_mnist": {"conflict_percents": [0.5, 1, 2, 5]}},   # the paper's, not the demo's
                   "grids": {"park_cmnist": {"train_variants": ["conflict_0.5", "conflict_1", "conflict_2", "conflict_5"]}}}
    config = _park(deep_merge(default_config, four_ratios))
    paper = load_numbers("debias_workbench.papers.park")
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
    assert "against LfF+BE: 0.5 %: higher: +5.0 points (95 % CI" in md
    # worst group: the final point (no curve row of it), its size over the seeds and the interval of the mean
    assert "| Ours (Park et al.) | 41.5 ± 1.0 (n = 8–10; 95 % CI" in md
    assert "val split (colours independent of the digit" in md
    assert "Mean ± sample std over 3 seed(s)" in md   # every row of the demo's grid runs 3 seeds
    assert percent("conflict_0.5") == 0.5 and percent("bg_conflict_2") == 2.0   # IN-9's variants too
    rows = _park_rows(config, lambda key, p, seed: 12.0 if key == "vanilla" else score[key])
    doc = Document("t")
    amplification_sections(doc, config, rows, paper, tmp_path)
    assert "**not informative**" in doc.markdown() and "against LfF+BE" not in doc.markdown()


def test_park_table3_shows_each_rows_switches_beside_the_papers_row(default_config, tmp_path):
    import yaml

    from debias_workbench.papers.park.tables import amplification_sections
    from debias_workbench.workflow.config import deep_merge

    config = _park(deep_merge(default_config, yaml.safe_load(open("config/park_ablation.yaml"))))
    paper = load_numbers("debias_workbench.papers.park")
    score = {"vanilla": 40.0, "lff_be": 50.0, "from_d": 52.0, "from_cand": 53.0, "no_weight": 54.0, "no_guide": 51.0,
             "no_bn": 50.5, "full": 60.0, "through_both": 55.0, "target_raw": 45.0}
    rows = _park_rows(config, lambda key, p, seed: score[key] + p + seed, grid="park_ablation")
    for name, exp in config["experiments"].items():  # training statistics of the guided epochs
        if exp.get("grid") == "park_ablation" and exp["method"] == "intrinsic_feature_enhancement":
            rows += [{"kind": "train", "experiment": name, "seed": 0, "epoch": epoch, "metric": metric, "value": value}
                     for epoch, sim in ((3, 0.2), (14, 0.05)) for metric, value in
                     (("guide_distance", sim), ("train_acc", 0.9), ("partner_conflicting_fraction", 0.75),
                      ("ie_mean", 1.02), ("partner_weight", 10 * sim))]
    doc = Document("t")
    amplification_sections(doc, config, rows, paper, tmp_path)
    md = doc.markdown()
    assert "Table 3 (ablation) – park_ablation" in md and "Table 1 – park_ablation" not in md
    # switches: L_guide, L_BN, x^BN from, s(x^BN) weight, Eq. 9 reading; then 1 % and 5 % selected, oracle; the paper
    assert ("| x^BN from D, no s(x^BN) weight | ✓ | ✓ | D | ✗ | target, shares | 49.0 ± 1.0 | 53.0 ± 1.0 | 54.0 ± 1.0 | "
            "58.0 ± 1.0 | 62.79 ± 1.21 |") in md
    assert "| without L_guide | ✗ | ✓ | D^BN | ✓ | target, shares | 48.0 ± 1.0 |" in md and "| 76.92 ± 1.03 | 74.03 ± 1.13 |" in md
    assert ("| Ours (Park et al.) | ✓ | ✓ | D^BN | ✓ | target, shares | 57.0 ± 1.0 | 61.0 ± 1.0 | 62.0 ± 1.0 | 66.0 ± 1.0 | "
            "65.22 ± 0.95 |") in md
    assert ("| Ours, Eq. 9 through both sides | ✓ | ✓ | D^BN | ✓ | through both | 52.0 ± 1.0 | 56.0 ± 1.0 | 57.0 ± 1.0 | "
            "61.0 ± 1.0 | – | – | – |") in md
    assert "| Ours, Eq. 9 raw target | ✓ | ✓ | D^BN | ✓ | target, raw | 42.0 ± 1.0 |" in md
    assert "| LfF+BE | 47.0 ± 1.0 |" in md and "it learns the classes beyond their bias" in md
    assert "without L_guide vs the full method: 1 %: lower: -9.0 points" in md
    assert "Ours, Eq. 9 through both sides vs the full method" in md
    assert ("| Ours (Park et al.) | 75 | 2.00 → 0.50 | 0.2 → 0.05 | 1.0200 | 90.0 | 75 | 2.00 → 0.50 | 0.2 → 0.05 | "
            "1.0200 | 90.0 |") in md  # how each row trained


def _shape_bias_rows(values_and_counts):
    """Eval rows of the shape bias: {experiment: [(value, decisions counted) per seed]}."""
    return [{"kind": "eval", "experiment": e, "seed": seed, "variant": "stylized", "metric": "shape_bias",
             "value": value, "n": n} for e, per_seed in values_and_counts.items() for seed, (value, n) in enumerate(per_seed)]


def test_a_shape_bias_from_too_few_images_shows_as_such_and_is_never_compared(default_config, tmp_path):
    from debias_workbench.papers.clad.texture import texture_sections
    from debias_workbench.papers.ssl_negatives.tables import ssl_sections
    from debias_workbench.report.aggregates import counted_table
    from debias_workbench.report.helpers import MIN_IMAGES, counted_values, value_cell

    assert MIN_IMAGES == 30
    labels = {"base_in9": "Base (IN9)", "base_sin9": "Base (SIN9)", "s_clad": "S-CLAD", "s_clad_plus": "S-CLAD+"}
    rows = _shape_bias_rows({"base_in9": [(20.0, 300), (22.0, 310)], "base_sin9": [(80.0, 200), (82.0, 210)],
                             "s_clad": [(0.0, 1), (100.0, 2)], "s_clad_plus": [(40.0, 90), (0.0, 1)]})
    shape_bias = counted_table(rows, labels, ("shape_bias",))
    assert shape_bias["S-CLAD"] == {"shape_bias": [], "shape_bias_too_few": [1, 2]}
    assert value_cell(shape_bias["S-CLAD"], "shape_bias") == "too few images (1, 2)"
    assert value_cell(shape_bias["S-CLAD+"], "shape_bias") == "40.0; 1 seed(s) left out, too few images (1)"
    assert counted_values(rows, "shape_bias", labels)["Base (IN9)"]["shape_bias"] == [20.0, 22.0]
    accuracy = {"original": [90.0, 91.0], "stylized": [60.0, 62.0]}
    table = {label: {**accuracy, **cols} for label, cols in shape_bias.items()}
    paper = load_numbers("debias_workbench.papers.clad")
    doc = Document("t")
    texture_sections(doc, default_config, table, paper, {}, tmp_path, PAPER_ROLES)
    md = doc.markdown()
    assert "| Ours | S-CLAD | 90.5 ± 0.7 | 61.0 ± 1.4 | – | – | too few images (1, 2) |" in md
    assert "S-CLAD: shape bias too few images (1, 2) vs 21.0 ± 1.4 % (not compared: fewer than 30" in md
    assert "S-CLAD+: shape bias 40.0; 1 seed(s) left out, too few images (1) vs 21.0 ± 1.4 % (cannot tell: +19.0 points (one seed on a side" in md
    assert "| S-CLAD | too few images (1, 2) | 0 |" in md and "| Base (SIN9) | 81.0 ± 1.4 | 2 |" in md
    assert "0.0 ±" not in md and "50.0 ± 70.7" not in md  # S-CLAD's two values never enter a mean
    assert (tmp_path / "shape_bias.png").stat().st_size > 0
    # the self-supervised table shows the same cell
    config = {"experiments": {"moco": {"method": "moco_v2", "dataset": "in9", "train_variant": "original",
                                       "label": "MoCo-v2"}}}
    doc = Document("t")
    ssl_sections(doc, config, {"MoCo-v2": {**accuracy, "shape_bias": [], "shape_bias_too_few": [3]}}, [],
                 load_numbers("debias_workbench.papers.ssl_negatives"), tmp_path, PAPER_ROLES)
    assert "| MoCo-v2 | 90.5 ± 0.7 | – | 61.0 ± 1.4 | – | – | – | – | too few images (3) |" in doc.markdown()


def test_ge_table1_says_which_probe_ran_and_which_columns_are_missing():
    """Under the ImageNet-100 Table 1: the probe that ran, -C's one corruption per image, and the paper's
    columns this run cannot show without the user's folders."""
    from debias_workbench.papers.ssl_negatives.tables import _table1_caption

    text = _table1_caption([{"probe_augment": True}], ["ImageNet-S", "ImageNet-R"])
    assert "fresh crop-and-flip views every epoch" in text and "No ImageNet-S / ImageNet-R column" in text
    assert "one (corruption, severity) pair per image" in text
    assert "computed once" in _table1_caption([{"probe_augment": False}], []) and "column:" not in _table1_caption(
        [{"probe_augment": False}], [])
