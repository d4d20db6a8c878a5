"""Paper reproductions plug in (debias_workbench/papers): a toy fifth paper, one folder under tests/
and one registry line here, reaches a built report. That the report's generic layer names no paper,
method or dataset family, so that a new one never needs an edit there, is tests/test_generic_layers.py's
(the one walker of every generic layer, tests/leaks.py)."""

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
import zarr

from debias_workbench.papers import REGISTRY as PAPERS
from debias_workbench.pipeline.store import create_array
from debias_workbench.report.build import build_report
from debias_workbench.report.context import ReportInputs
from debias_workbench.workflow.config import resolve_config
from debias_workbench.workflow.report_slice import report_config
from debias_workbench.workflow.slices import config_provenance

from .conftest import ROOT
from .toy_paper.report import HEADING

def _inputs(tmp_path: Path, default_config: dict) -> tuple[dict, list[Path], Path, dict[str, Path]]:
    """The report config slice of the demo config, an ERM run's Original accuracy over two seeds, an
    empty segmentation-quality file and one tiny store: what `build_report` reads."""
    config = resolve_config(default_config)
    config = report_config(config, config_provenance(config, ["config/config.yaml"], {}))
    erm = next(n for n, e in config["experiments"].items() if (e["method"], e.get("train_variant")) == ("erm", "original"))
    rows = [{"kind": "eval", "experiment": erm, "seed": seed, "dataset": config["evaluation"]["dataset"],
             "metric": "accuracy", "variant": "original", "value": value, "n": 100}
            for seed, value in ((0, 50.0), (1, 52.0))]
    metrics = tmp_path / "eval.jsonl"
    metrics.write_text("".join(json.dumps(r) + "\n" for r in rows))
    quality = tmp_path / "segmentation_quality.jsonl"
    quality.write_text("")
    store = tmp_path / "original.zarr"
    images = create_array(zarr.open_group(str(store), mode="w"), "val/images", (4, 8, 8, 3), np.uint8, 4)
    images[:] = 128
    return config, [metrics], quality, {"original": store}


def test_a_toy_fifth_paper_reaches_the_built_report(tmp_path, default_config, monkeypatch):
    monkeypatch.setitem(PAPERS, "toy", "tests.toy_paper.report:PAPER")  # the one registry line
    config, metrics, quality, stores = _inputs(tmp_path, default_config)
    build_report(ReportInputs(config, metrics, quality, [], stores), tmp_path / "report")
    md = (tmp_path / "report" / "report.md").read_text()
    assert f"## {HEADING}" in md
    assert "| Ours | 51.0 ± 1.4 |" in md and "| Paper | 42.0 |" in md  # its role's model, its numbers.yaml
    assert "The toy paper's rows are quoted from its Table 1." in md     # its intro line
    toy = md[md.index(f"## {HEADING}"):]  # the section (the contents at the top list its heading too)
    assert toy.index("Model selection: the model at the end of training") < toy.index("\n## ")  # its rule
    # among the main dataset's tables (after the registered papers'), before the grid reports and the data
    assert md.index("## Non-semantic negatives") < md.index(f"## {HEADING}") < md.index("## Table 1 – rebias_mnist")

def test_every_shipped_protocol_goes_above_a_section_of_the_report():
    """A protocol whose `section` names no section would be dropped from the report: the report refuses it,
    naming the key, and every shipped config's protocols name one."""
    from debias_workbench.core.errors import PipelineError
    from debias_workbench.report.build import check_protocol_sections
    from debias_workbench.report.sections import sections

    names = [section.name for section in sections()]
    for path in sorted((ROOT / "config").glob("*.yaml")):
        config = yaml.safe_load(path.read_text()) or {}
        check_protocol_sections(config, names)  # raises on a lost protocol
    with pytest.raises(PipelineError, match=r"protocols.clad.section: 'clad_table_2' is no section of the report"):
        check_protocol_sections({"protocols": {"clad": {"section": "clad_table_2"}}}, names)
