"""What a config edit reruns and one-target regeneration (on the paper configs' smoke run,
`conftest.paper_smoke`), and the dry-run graphs of the default, real-data and SLURM configurations."""

import csv
import itertools
import json
import math
import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
import torch

from debias_workbench.workflow import paper_hooks

from .conftest import ROOT, workdir
from .test_generation import store_digest


def snakemake(*args, cwd=None, timeout=900, ok=True, env=None):
    """Snakemake's output of `args`, run in `cwd` (default: this process's view of the checkout, `workdir`)."""
    proc = subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=cwd or workdir(), capture_output=True, text=True,
                          timeout=timeout, env=None if env is None else {**os.environ, **env})
    if ok:
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def planned(output: str) -> dict[str, int]:
    """{rule: job count} of a dry run's job table ({} when nothing is to be done), without the
    `job_config` jobs (a new config file for each job whose config changed: one per rerun job or fewer)."""
    if "Job stats:" not in output:
        return {}
    table = output.split("Job stats:", 1)[1].split("total", 1)[0]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M) if m[1] != "job_config"}


def tree_state(root: Path) -> dict[str, tuple[int, int]]:
    """{path: (size, mtime)} of every file under `root` but Snakemake's own folder and Python's caches."""
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")
            if p.is_file() and ".snakemake" not in p.parts and "__pycache__" not in p.parts}


def job_blocks(output: str) -> list[tuple[str, str]]:
    """(rule, resources line) of every job a dry run lists, but the job configs' (run by Snakemake itself)."""
    blocks = re.findall(r"^(?:rule|checkpoint|localrule) (\w+):\n(?:    .*\n)*?    resources: (.*)$", output, re.M)
    return [(rule, resources) for rule, resources in blocks if rule != "job_config"]  # as `planned`


class _Tables(HTMLParser):
    """Every <table> of a report.html: (its h2 heading, the last paragraph before it, its rows of cell texts)."""

    def __init__(self):
        super().__init__()
        self.tables: list[tuple[str, str, list[list[str]]]] = []
        self.heading = self.para = ""
        self._text: str | None = None  # the h2, p or cell being read
        self._row: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag in ("h2", "p", "td", "th"):
            self._text = ""
        elif tag == "table":
            self.tables.append((self.heading, self.para, []))
        elif tag == "tr":
            self._row = []
            self.tables[-1][2].append(self._row)

    def handle_endtag(self, tag):
        if tag == "h2":
            self.heading, self.para = self._text, ""
        elif tag == "p":
            self.para = self._text
        elif tag in ("td", "th"):
            self._row.append(self._text)
        if tag in ("h2", "p", "td", "th"):
            self._text = None

    def handle_data(self, data):
        if self._text is not None:
            self._text += data


def report_tables(path) -> list[tuple[str, str, list[list[str]]]]:
    parser = _Tables()
    parser.feed(path.read_text())
    return parser.tables


def metrics_csv(path) -> dict[tuple[str, str, str], dict]:
    """{(source, model, metric): row} of a report's metrics.csv, values as floats."""
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    out = {}
    for r in rows:
        key = (r["source"], r["model"], r["metric"])
        assert key not in out, key  # one row per (source, model, metric)
        out[key] = {"mean": float(r["mean"]), "std": float(r["std"]), "n": int(r["n_seeds"]),
                    "values": [float(v) for v in r["values"].split()]}
    return out


def assert_cell_shows(cell: str, row: dict | None, where) -> None:
    """A table cell shows the metrics.csv row it is made from as the report prints it ("12.3" for
    one seed, "12.3 ± 0.4" for several, "–" for no number), to the rounding of the printed digits."""
    if row is None:
        assert cell == "–", where
        return
    assert "nan" not in cell.lower() or math.isnan(row["mean"]), (where, cell, row)
    if math.isnan(row["mean"]):
        return
    numbers = [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?", cell)]
    expected = [row["mean"]] if row["n"] == 1 else [row["mean"], row["std"]]
    assert len(numbers) == len(expected) and all(abs(a - b) <= 0.05 + 1e-6 for a, b in zip(numbers, expected)), \
        (where, cell, row)


#: Table 2's columns (CLAD paper) and the metrics they show
TABLE2_METRICS = {"Original": "original", "Only-FG": "only_fg", "Mixed-Rand": "mixed_rand", "Mixed-Same": "mixed_same",
                  "Only-BG-T": "only_bg_t", "BG-Gap": "bg_gap"}


def test_the_report_shows_every_experiment_with_the_numbers_of_its_metric_rows(paper_smoke):
    """report.html parsed, metrics.csv read, both held against the config and the runs' own eval
    rows. Catches a model row left out of a table (every configured experiment must appear: IN-9
    runs in "Accuracy on every variant" and Table 2 unless they are sweep points, ImageNet-100 runs
    under their dataset, grid cells in metrics.csv and their grid's tables, every run in the
    training table); numbers printed under the wrong model, column or test set (cells must show
    the metrics.csv value they are made from, rounded as printed); NaN or "–" printed where a
    number exists; metrics.csv aggregating the wrong runs (labels swapped: its values must be the
    runs' eval.jsonl accuracies, BG-GAP = Mixed-Same - Mixed-Rand) or miscounting (mean, std and
    n_seeds must follow from its values)."""
    import yaml

    from debias_workbench.workflow.config import deep_merge, resolve_config

    results, args = paper_smoke
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    for path in args[args.index("--configfile") + 1:args.index("--config")]:
        config = deep_merge(config, yaml.safe_load((ROOT / path).read_text()))  # as Snakemake merges --configfile
    config = resolve_config(config)
    experiments = config["experiments"]
    main_dataset = config["evaluation"]["dataset"]
    swept = {e for sweep in config.get("sweep_points", {}).values() for _, e in sweep["points"]} - \
        {sweep["experiment"] for sweep in config.get("sweeps", {}).values()}
    metrics = metrics_csv(results / "report" / "metrics.csv")
    tables = report_tables(results / "report" / "report.html")
    assert tables

    # metrics.csv: each row's mean, std and seed count follow from its values
    for key, row in metrics.items():
        assert row["n"] == len(row["values"]) > 0, key
        finite = [v for v in row["values"] if not math.isnan(v)]
        if len(finite) == row["n"]:
            assert abs(row["mean"] - sum(finite) / len(finite)) <= 1e-4 + 1e-9, key
            if row["n"] == 1:
                assert row["std"] == 0.0, key
    # ... and its eval rows are the runs' own accuracies on the evaluation dataset (BG-GAP derived from them)
    accuracy: dict[tuple[str, str], list[tuple[int, float]]] = {}
    for path in sorted(results.glob("runs/*/seed*/*.jsonl")):
        for line in path.read_text().splitlines():
            r = json.loads(line)
            if (r.get("kind") == "eval" and r.get("metric") == "accuracy" and r.get("dataset") == main_dataset
                    and r.get("experiment") in experiments and "grid" not in experiments[r["experiment"]]):
                accuracy.setdefault((experiments[r["experiment"]]["label"], r["variant"]), []).append((r["seed"], r["value"]))
    assert accuracy
    for (label, variant), seeds in accuracy.items():
        values = [v for _, v in sorted(seeds)]
        assert metrics[("eval", label, variant)]["values"] == pytest.approx(values, abs=5e-5), (label, variant)
    for label in {label for label, _ in accuracy}:
        if ("eval", label, "mixed_same") in metrics and ("eval", label, "mixed_rand") in metrics:
            same, rand = metrics[("eval", label, "mixed_same")]["values"], metrics[("eval", label, "mixed_rand")]["values"]
            assert metrics[("eval", label, "bg_gap")]["values"] == pytest.approx(
                [a - b for a, b in zip(same, rand)], abs=2e-4), label

    def table(heading_start: str) -> list[list[str]]:
        found = [rows for heading, _, rows in tables if heading.startswith(heading_start)]
        assert found, heading_start
        return found[0]

    # Accuracy on every variant: one row per IN-9 run (sweep points aside), each cell its metrics.csv value
    every = table("Accuracy on every variant")
    header, body = every[0], every[1:]
    shown = [r[0] for r in body]
    in9_labels = {exp["label"] for e, exp in experiments.items()
                  if "grid" not in exp and exp["dataset"] == main_dataset and e not in swept}
    assert len(shown) == len(set(shown)) and set(shown) == in9_labels
    for r in body:
        assert len(r) == len(header)
        for variant, cell in zip(header[1:], r[1:]):
            assert_cell_shows(cell, metrics.get(("eval", r[0], variant)), (r[0], variant))
    # Table 2: our rows, the same numbers under the paper's column names
    table2 = table("Table 2 –")
    columns = [TABLE2_METRICS[h.split(" ")[0]] for h in table2[0][2:]]
    ours = [r for r in table2[1:] if "(paper)" not in r[0]]  # the paper's rows are quoted
    assert {r[1] for r in ours} == in9_labels
    for r in ours:
        for metric, cell in zip(columns, r[2:]):
            assert_cell_shows(cell, metrics.get(("eval", r[1], metric)), ("Table 2", r[1], metric))
    # runs scored on a dataset of their own (ImageNet-100): in metrics.csv and in a table of the report
    cells = {c for _, _, rows in tables for r in rows for c in r}
    for e, exp in experiments.items():
        if "grid" not in exp and exp["dataset"] != main_dataset:
            assert any(src == f"eval:{exp['dataset']}" and model == exp["label"] for src, model, _ in metrics), e
            assert exp["label"] in cells, e
    # every run (grid cells aside) in the training table, by experiment name
    assert {r[0] for r in table("Training")[1:]} == {e for e, exp in experiments.items() if "grid" not in exp}
    # grid cells: every one in metrics.csv; every method label of a grid in its grid's tables
    for e, exp in experiments.items():
        if "grid" in exp:
            assert any(src == f"grid:{exp['grid']}" and model == f"{exp['grid_method']} {exp['train_variant']}"
                       for src, model, _ in metrics), e
    for name, grid in config.get("grids", {}).items():
        grid_cells = {c for heading, _, rows in tables if name in heading for r in rows for c in r}
        assert {m["label"] for m in grid["methods"].values()} <= grid_cells, name
    # ReBias Table 1: each of our rho rows shows the grid's biased / unbiased accuracy of each method
    checked = []
    for name, grid in config.get("grids", {}).items():
        keys = {m["label"]: k for k, m in grid["methods"].items()}
        for heading, para, rows in tables:
            if heading.startswith(f"Table 1 – {name}:"):
                metric = {"Biased accuracy": "biased", "Unbiased accuracy": "unbiased"}[para.strip("* ")]
                checked.append((name, metric))
                for r in rows[1:]:
                    if r[0].startswith("ρ = ") and "(paper)" not in r[0]:
                        variant = f"rho_{r[0].removeprefix('ρ = ')}"
                        for label, cell in zip(rows[0][1:], r[1:]):
                            assert_cell_shows(cell, metrics.get((f"grid:{name}", f"{keys[label]} {variant}", metric)),
                                              (name, label, variant, metric))
    assert sorted(checked) == [("rebias_mnist", "biased"), ("rebias_mnist", "unbiased")]  # biased_mnist_paper.yaml's grid


def test_a_report_key_reruns_only_the_report(paper_smoke, tmp_path):
    results, args = paper_smoke
    assert planned(snakemake("-n", "all", "--cores", "2", *args)) == {}
    edit = tmp_path / "report.yaml"
    edit.write_text("report: {grid_images: 1}\n")  # smoke mode caps it at 2: 1 is a real edit
    configs, rest = args[:args.index("--config")], args[args.index("--config"):]
    assert planned(snakemake("-n", "all", "--cores", "2", *configs, str(edit), *rest)) == {"report": 1, "all": 1}


def test_the_interpreter_and_the_checkout_reach_jobs_through_the_environment():
    from debias_workbench.workflow.job_process import PYTHON_COMMAND, interpreter_environment

    assert interpreter_environment("/co", "/venv/bin/python", {}) == {"WORKBENCH_PYTHON": "/venv/bin/python",
                                                                       "PYTHONPATH": "/co"}
    # the checkout first, once, before what the caller had
    assert interpreter_environment("/co", "python", {"PYTHONPATH": "/x:/y"})["PYTHONPATH"] == "/co:/x:/y"
    assert interpreter_environment("/co", "python", {"PYTHONPATH": "/co:/x"})["PYTHONPATH"] == "/co:/x"
    # a command printed by `snakemake -p` runs in a shell without the variable too
    out = subprocess.run(["bash", "-c", f"unset WORKBENCH_PYTHON; {PYTHON_COMMAND} -c 'print(42)'"],
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "42"


def another_path_to_this_interpreter(folder: Path) -> Path:
    """This interpreter, with its packages, under another path: `folder`/env links to the whole
    environment (sys.prefix) and the interpreter is started through that link. A link to the
    executable alone would not do inside a virtual environment: Python looks for `pyvenv.cfg` beside
    the path it was started from (and one folder up), so a lone link starts the base interpreter
    without the venv's packages."""
    executable = Path(sys.executable)
    if not executable.is_relative_to(sys.prefix):
        pytest.skip(f"the interpreter {executable} lies outside its environment {sys.prefix}")
    (folder / "env").symlink_to(sys.prefix, target_is_directory=True)
    return folder / "env" / executable.relative_to(sys.prefix)


def test_another_path_to_the_interpreter_reruns_nothing(paper_smoke, tmp_path):
    """A job's identity is its config: starting the finished workflow through another path to the
    same interpreter (a symlink, as another venv or `snakemake` against `python -m snakemake` gives)
    plans nothing, because neither params nor shell text name the interpreter or the checkout."""
    results, args = paper_smoke
    other = another_path_to_this_interpreter(tmp_path)
    proc = subprocess.run([str(other), "-m", "snakemake", "-n", "all", "--cores", "2", *args], cwd=workdir(),
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert planned(proc.stdout + proc.stderr) == {}, (proc.stdout + proc.stderr)[-3000:]


def test_a_stylization_edit_remakes_only_the_stylized_store_and_the_runs_reading_it(paper_smoke, tmp_path):
    """alpha of Stylized IN-9: its shard and gather rerun, the runs trained on it or reading it
    (Base (SIN9), S-CLAD, S-CLAD+) retrain, every IN-9 model is rescored (the test set changed);
    the segmentation, the other variants, ImageNet-100 and the other runs are untouched."""
    results, args = paper_smoke
    edit = tmp_path / "stylized.yaml"
    edit.write_text("datasets: {in9: {stylized: {alpha: 0.5}}}\n")
    configs, rest = args[:args.index("--config")], args[args.index("--config"):]
    jobs = planned(snakemake("-n", "all", "--cores", "2", *configs, str(edit), *rest))
    assert jobs["in9_stylized_shard"] == 1 and jobs["in9_derived"] == 1 and jobs["train"] == 3
    assert not {"in9_segment_shard", "in9_segment", "in9_variant", "in9_texture_shard", "in9_external"} & set(jobs)


def test_one_experiments_optimiser_reruns_exactly_its_runs_and_their_readers(paper_smoke, tmp_path):
    """An IN-9 run's optimiser: its training, scoring, the analyses reading it and the report (planned);
    an ImageNet-100 run's (which no analysis reads) is rerun for real and its weights change."""
    results, args = paper_smoke
    configs, rest = args[:args.index("--config")], args[args.index("--config"):]
    edit = tmp_path / "optimiser.yaml"
    edit.write_text("experiments: {base_in9: {method: erm, dataset: in9, train_variant: original, label: Base (IN9),"
                    " training: {optimizer: {name: sgd, lr: 0.5}}}}\n")
    assert planned(snakemake("-n", "all", "--cores", "2", *configs, str(edit), *rest)) == {
        "train": 1, "evaluate": 1, "analysis": 2, "analysis_saliency": 1, "report": 1, "all": 1}
    # twice its learning rate (0.03): 0.5 made the smoke run's linear probe diverge on the drawn stand-ins
    edit.write_text("experiments: {in100_byol: {training: {optimizer: {lr: 0.06}}}}\n")
    args = ["all", "--cores", "2", *configs, str(edit), *rest]
    # its scoring job is that of the experiments not scored on the official images (rule evaluate_2 here)
    assert planned(snakemake("-n", *args)) == {"train": 1, "evaluate_2": 1, "report": 1, "all": 1}
    model = results / "runs" / "in100_byol" / "seed0" / "model.pt"
    before = torch.load(model, weights_only=False)
    snakemake(*args)
    after = torch.load(model, weights_only=False)
    assert after["run_config"]["training"]["optimizer"]["lr"] == 0.06
    key = "network.backbone.conv1.weight"
    assert not torch.equal(before["state_dict"][key], after["state_dict"][key])
    assert planned(snakemake("-n", *args)) == {}


def test_one_variant_regenerates_byte_identical(paper_smoke):
    results, args = paper_smoke
    store = results / "datasets" / "in9" / "mixed_rand.zarr"
    before = store_digest(store)
    shutil.rmtree(store)
    snakemake(str(store), "--cores", "1", *args)
    assert store_digest(store) == before


def test_a_local_run_runs_no_more_gpu_jobs_than_the_node_shows(paper_smoke):
    """`snakemake --cores N` on a GPU node: the Snakefile caps the `gpu` resource at the visible
    GPUs (here two, as CUDA_VISIBLE_DEVICES says), so training and scoring jobs never share one."""
    results, args = paper_smoke
    store = results / "datasets" / "in9" / "only_fg.zarr"
    out = snakemake(str(store), "--force", "--cores", "1", *args, env={"CUDA_VISIBLE_DEVICES": "0,1"})
    assert re.search(r'Provided resources: .*\bgpu=(Resource\("gpu", )?2\b', out), out[-2000:]


def _demo_shards(default_config: dict) -> int:
    """Segmentation shards of the demo's synthetic IN-9: every image of every class in blocks of
    `block_images` (4,770 images in 10 shards of 512 at 480 + 50 per class)."""
    in9 = default_config["datasets"]["in9"]
    synthetic = in9["source"]["synthetic"]
    images = len(in9["classes"]) * (synthetic["train_per_class"] + synthetic["val_per_class"])
    return math.ceil(images / in9["block_images"])


def test_a_dry_run_and_the_linter_write_nothing_in_a_fresh_checkout(tmp_path):
    """`snakemake -n` and `--lint` on the tracked files alone (a fresh clone): no file changed or
    added, no results/ folder; the job configs are written by the job_config rule when jobs run."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip(f"{ROOT} is not a git checkout: the test copies its tracked files")
    checkout = tmp_path / "checkout"
    for name in filter(None, listed.stdout.split("\0")):
        if (ROOT / name).is_file():
            (checkout / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, checkout / name)
    before = tree_state(checkout)
    assert "job_config" in snakemake("-n", "all", "--cores", "2", cwd=checkout)
    snakemake("--lint", cwd=checkout)
    assert not (checkout / "results").exists()
    assert tree_state(checkout) == before


def test_dry_run_lists_the_whole_graph(default_config, tmp_path):
    jobs = planned(snakemake("-n", "--cores", "32", "--config", f"results={tmp_path}"))
    for rule in ("in9_synthetic_source", "in9_list", "in9_segment_shard", "in9_segment", "in9_variant",
                 "dataset_variant", "train", "train_rebias_mnist", "evaluate", "evaluate_rebias_mnist", "analysis",
                 "analysis_saliency", "report", "all"):
        assert rule in jobs, rule
    assert jobs["in9_segment_shard"] == _demo_shards(default_config) == 10


def test_slurm_dry_run_puts_every_gpu_job_on_the_gpu_partition(default_config, tmp_path):
    out = snakemake("-n", "--executor", "slurm", "--workflow-profile", "profiles/slurm", "all",
                    "--config", f"results={tmp_path}")
    blocks = [(rule, res) for rule, res in job_blocks(out) if rule != "all"]
    assert len(blocks) == sum(planned(out).values()) - 1
    for rule, res in blocks:
        gpu = "gpu=1" in res
        assert ("slurm_partition=gpu," in res) == gpu and ("slurm_partition=cpu," in res) != gpu, (rule, res)
        assert re.search(r"runtime=\d+", res) and re.search(r"mem_mb=\d+", res), (rule, res)
    assert {rule for rule, res in blocks if "gpu=1" in res} >= {"train", "train_rebias_mnist", "evaluate", "evaluate_rebias_mnist",
                                                               "analysis", "analysis_saliency"}
    assert sum(rule == "in9_segment_shard" for rule, _ in blocks) == _demo_shards(default_config)


def test_real_data_config_with_a_missing_root_fails_at_start_naming_it(tmp_path):
    out = snakemake("-n", "all", "--cores", "32", "--configfile", "config/imagenet9.yaml",
                    "--config", f"results={tmp_path}", ok=False)
    assert "datasets.in9.source.in9_folder.root: /data/bg_challenge does not exist. Place there the folder" in out
    assert "Missing input files" not in out  # stopped before the job graph


def test_a_missing_path_stops_a_config_whose_results_are_finished(paper_smoke, tmp_path):
    """A finished results folder (here the paper configs' smoke run, as a user's finished demo) and
    the same configs with one file gone: the run stops naming the key, instead of taking the old
    report for a source file and saying "Nothing to be done"."""
    results, args = paper_smoke
    configs, rest = args[:args.index("--config")], args[args.index("--config"):]
    gone = tmp_path / "resnet50-gone.pth"
    edit = tmp_path / "weights.yaml"
    edit.write_text(f"training: {{pretrained: {str(gone)!r}}}\n")
    before = {p: p.stat().st_mtime_ns for p in (results / "report").iterdir()}
    out = snakemake("-n", "all", "--cores", "2", *configs, str(edit), *rest, ok=False)
    assert f"training.pretrained: {gone} does not exist. Place there the file this key names" in out
    assert "Nothing to be done" not in out
    assert {p: p.stat().st_mtime_ns for p in (results / "report").iterdir()} == before


def test_real_data_config_dry_runs_on_a_folder(tmp_path):
    """config/imagenet9.yaml on an IN-9 folder: the listing checkpoint comes first, the rest is
    planned once it has run."""
    root = tmp_path / "bg_challenge"
    for cls in ("00_dog", "01_bird"):
        (root / "original" / "val" / cls).mkdir(parents=True)
    extra = tmp_path / "paths.yaml"
    extra.write_text(f"datasets: {{in9: {{source: {{in9_folder: {{root: {str(root)!r}, annotations: null}}}}}}}}\n")
    out = snakemake("-n", "all", "--cores", "32", "--configfile", "config/imagenet9.yaml", str(extra),
                    "--config", f"results={tmp_path / 'results'}", ok=False)
    # the paper's pretrained ResNet-50, Stylized IN-9's style folder, Table 2's VGG and the official test images
    for key in ("training.pretrained: /models/resnet50-0676ba61.pth", "datasets.in9.stylized.styles.root",
                "analyses.texture.vgg", "datasets.official.root"):
        assert f"\n  {key}" in out, key
    assert "in9_folder.root" not in out
    weights = tmp_path / "resnet50.pth"
    weights.write_bytes(b"stand-in")  # only its existence matters to the DAG
    for variant in ("only_fg", "no_fg", "only_bg_b", "only_bg_t", "mixed_same", "mixed_rand", "mixed_next"):
        (root / variant / "val").mkdir(parents=True)  # the release's test folders (datasets.official)
    styles = tmp_path / "textures"
    styles.mkdir()
    extra.write_text(json.dumps({"datasets": {"in9": {
        "source": {"in9_folder": {"root": str(root), "annotations": None}},
        "stylized": {"styles": {"kind": "folder", "root": str(styles), "size": 256}}},
        "official": {"root": str(root)}},
        "training": {"pretrained": str(weights)}, "analyses": {"texture": {"vgg": str(weights)}}}))
    jobs = planned(snakemake("-n", "all", "--cores", "32", "--configfile", "config/imagenet9.yaml", str(extra),
                             "--config", f"results={tmp_path / 'results'}"))
    assert jobs["in9_list"] == 1 and "train" in jobs and "in9_segment_shard" not in jobs  # shards: after the listing


def test_snakemake_lint_passes():
    out = snakemake("--lint", "--config", "results=/tmp/lint-results")
    assert "good condition" in out


#: names the rule files take from common.smk's imports (everything else shared is assigned or defined there)
COMMON_IMPORTS = {"res", "job_server", "variants", "get_family", "folder_fingerprint", "dataset_family",
                  "dataset_variants"}


def _defined(source: str) -> set[str]:
    """Upper-case globals assigned and functions defined at the top level of a rule file."""
    return set(re.findall(r"^([A-Z_][A-Z0-9_]*)\s*\+?=", source, re.M)) | set(re.findall(r"^def (\w+)", source, re.M))


def test_each_rule_file_states_the_shared_names_it_uses():
    """Rule files share one namespace (Snakemake's include): each says in a `# Uses` comment which
    names of common.smk and of the other rule files it reads, so that a reader (and a reorder of
    the includes) knows what it depends on. Recomputed here from the files' code, the papers' rule
    files (workflow.paper_hooks.rule_files) among them."""
    files = sorted((ROOT / "rules").glob("*.smk")) + [Path(f) for f in paper_hooks.rule_files()]
    sources = {str(f.relative_to(ROOT)): f.read_text() for f in files}
    common = "rules/common.smk"
    shared = {common: _defined(sources[common]) | COMMON_IMPORTS}
    shared |= {name: _defined(src) for name, src in sources.items() if name != common}
    for name, source in sources.items():
        if name == common:
            continue
        code = re.sub(r"^#.*$", "", source, flags=re.M)
        parts = []
        for other in [common, *sorted(n for n in shared if n not in (common, name))]:
            used = sorted(n for n in shared[other] - _defined(source) if re.search(rf"\b{n}\b", code))
            if used:
                parts.append(f"{other}: {', '.join(used)}")
        lines = source.splitlines()
        start = next((i for i, line in enumerate(lines) if line.startswith("# Uses ")), len(lines))
        block = itertools.takewhile(lambda line: line.startswith("# "), lines[start:])
        stated = " ".join(line[2:] for line in block).removeprefix("Uses ").removesuffix(".")
        assert stated == "; ".join(parts), f"{name}: its '# Uses' comment should read: Uses {'; '.join(parts)}."
