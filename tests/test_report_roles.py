"""The report's verdicts pick their models by role (method and train variant: `report.roles`),
never by display label: every shipped config gives each role one experiment at most, and the
report of the paper configs' smoke run says the same with every label renamed."""

import base64
import json
import shlex
import subprocess
import sys

import pytest
import yaml

from debias_workbench.report.helpers import sweep_only_experiments
from debias_workbench.report.roles import all_roles
from debias_workbench.workflow.config import deep_merge, resolve_config

from .conftest import ROOT, workdir
from .test_config import SHIPPED_CONFIGS


def _candidates(config: dict, role: str) -> list[str]:
    """The experiments of the main evaluation table that could play `role` (the report's candidates)."""
    want, dataset, swept = all_roles()[role], config["evaluation"]["dataset"], sweep_only_experiments(config)
    return [name for name, exp in config["experiments"].items()
            if (exp["method"], exp.get("train_variant")) == (want.method, want.train_variant)
            and not exp.get("grid") and name not in swept and exp.get("dataset") == dataset
            and exp.get("eval_dataset", dataset) == dataset]


@pytest.mark.parametrize("name", [None, *SHIPPED_CONFIGS])
def test_every_shipped_config_gives_each_role_one_experiment_at_most(default_config, name):
    own = yaml.safe_load((ROOT / "config" / name).read_text()) if name else {}
    config = resolve_config(deep_merge(default_config, own or {}))
    for role in all_roles():
        assert len(_candidates(config, role)) <= 1, (name, role, _candidates(config, role))
    dataset = config["evaluation"]["dataset"]
    # where the main evaluation table has runs (not config/matrix.yaml's grids only, nor a paper config whose runs
    # are on datasets of their own: the report's IN-9 part comes with config/imagenet9.yaml)
    if any(not exp.get("grid") and exp.get("dataset") == dataset for exp in config["experiments"].values()):
        assert _candidates(config, "base_in9") and _candidates(config, "clad")  # the demo's CLAD verdict: its models


RENAMED = "«{}»"  # a renamed label holds the old one, so the report's text maps back


def _report_command(results) -> list[str]:
    """The arguments of the `workbench report` job that made `results`/report (Snakemake's record)."""
    target = str(results / "report" / "report.md")
    # the smoke run's Snakemake kept its record in the folder it ran in (`workdir`)
    record = workdir() / ".snakemake" / "metadata" / base64.b64encode(target.encode()).decode()
    assert record.exists(), f"no Snakemake record of {target}"
    words = shlex.split(json.loads(record.read_text())["shellcmd"].split(">", 1)[0])
    return words[words.index("report") + 1:]


def _build(args: list[str], config_file, out_dir) -> str:
    args = list(args)
    args[args.index("--config") + 1] = str(config_file)
    args[args.index("--out-dir") + 1] = str(out_dir)
    subprocess.run([sys.executable, "-m", "debias_workbench", "report", *args], cwd=workdir(), check=True)
    return (out_dir / "report.md").read_text()


def test_renaming_every_label_changes_no_verdict(paper_smoke, tmp_path):
    """Every experiment's label renamed in the report's config: the same report, labels aside
    (tables, capability checks, verdict sentences), from the same rows."""
    results, _args = paper_smoke
    args = _report_command(results)
    config = json.loads((workdir() / args[args.index("--config") + 1]).read_text())  # an absolute path stays one
    renamed = json.loads(json.dumps(config))
    for exp in renamed["experiments"].values():
        exp["label"] = RENAMED.format(exp["label"])
    (tmp_path / "same.json").write_text(json.dumps(config))
    (tmp_path / "renamed.json").write_text(json.dumps(renamed))
    same = _build(args, tmp_path / "same.json", tmp_path / "same")
    other = _build(args, tmp_path / "renamed.json", tmp_path / "renamed")
    assert "«" in other and "«" not in same
    # the same lines; only the rows of models without a role, listed by label, may change places
    assert sorted(other.replace("«", "").replace("»", "").splitlines()) == sorted(same.splitlines())
    verdicts = [line for line in same.splitlines() if "Capability check" in line or " vs " in line]
    assert len(verdicts) >= 3, "the smoke report has capability checks and verdicts to compare"
