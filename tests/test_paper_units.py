"""Paper reproductions plug in (debias_workbench/papers): a toy fifth paper, one folder under tests/
and one registry line here, reaches a built report; and the report's generic layer names no
paper, method or dataset family, so that a new one never needs an edit there."""

import ast
import json
import re
from pathlib import Path

import numpy as np
import pytest
import yaml
import zarr

from debias_workbench.papers import REGISTRY as PAPERS
from debias_workbench.pipeline.datasets import REGISTRY as FAMILIES
from debias_workbench.pipeline.datasets import get_family
from debias_workbench.pipeline.store import create_array
from debias_workbench.report.build import build_report
from debias_workbench.training.methods import REGISTRY as METHODS
from debias_workbench.workflow.config import resolve_config
from debias_workbench.workflow.report_slice import report_config
from debias_workbench.workflow.slices import config_provenance

from .conftest import ROOT
from .toy_paper.report import HEADING

#: the generic layer of the report: every module of debias_workbench/report (the papers' sections
#: live in debias_workbench/papers)
GENERIC = ROOT / "debias_workbench" / "report"


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
    build_report(config, metrics, quality, [], stores, tmp_path / "report")
    md = (tmp_path / "report" / "report.md").read_text()
    assert f"## {HEADING}" in md
    assert "| Ours | 51.0 ± 1.4 |" in md and "| Paper | 42.0 |" in md  # its role's model, its numbers.yaml
    assert "The toy paper's rows are quoted from its Table 1." in md     # its intro line
    toy = md[md.index(f"## {HEADING}"):]  # the section (the contents at the top list its heading too)
    assert toy.index("Model selection: the model at the end of training") < toy.index("\n## ")  # its rule
    # among the main dataset's tables (after the registered papers'), before the grid reports and the data
    assert md.index("## Non-semantic negatives") < md.index(f"## {HEADING}") < md.index("## Table 1 – rebias_mnist")

def _names() -> set[str]:
    """Every paper, method and dataset family, by its registered name, less the names a family also
    gives a test set (Biased MNIST's `biased` test set is data, not the `biased` method)."""
    test_sets = {column for family in FAMILIES for column in get_family(family).headline}
    return (set(PAPERS) | set(METHODS) | set(FAMILIES)) - test_sets


def _docstrings(tree: ast.AST) -> set[int]:
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}


def _words(tree: ast.AST) -> list[tuple[int, str, bool]]:
    """(line, text, prose) of every identifier and string literal but the docstrings (comments are not
    in the tree): names defined, read, attributes, arguments, imported names."""
    docstrings, out = _docstrings(tree), []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            out.append((line, node.value, bool(re.search(r"\s", node.value))))
        for text in (getattr(node, attr, None) for attr in ("id", "attr", "name", "arg", "asname")):
            if isinstance(text, str):
                out.append((line, text, False))
    return out


def named(source: str, names: set[str]) -> list[str]:
    """"line: name in text" for every name `source` holds as a word of an identifier or a string (an
    underscore separates words: `clad_table2` names `clad`); in prose (a string with spaces), names of
    four letters or more only, so that English ("16 hex digits") is not read as a method."""
    hits = []
    for line, text, prose in _words(ast.parse(source)):
        for name in sorted(names):
            if (not prose or len(name) >= 4) and re.search(rf"(?<![a-z0-9]){re.escape(name)}(?![a-z0-9])", text.lower()):
                hits.append(f"{line}: {name} in {text[:60]!r}")
    return hits


def test_the_reports_generic_layer_names_no_paper_method_or_family():
    names = _names()
    hits = {str(path.relative_to(ROOT)): found for path in sorted(GENERIC.rglob("*.py"))
            if (found := named(path.read_text(), names))}
    assert not hits, hits


def test_the_name_check_sees_names_in_code_and_strings_but_not_in_docstrings_or_comments():
    names = _names()
    assert named('ORDER = ("base_in9", "s_clad")\n', names)                 # a role of a paper's table
    assert named('x = table["clad_table2"]\n', names)                       # a paper's numbers
    assert named("def ssl_runs(config):\n    return SSL_METHODS\n", {"ssl"})  # an identifier
    assert named('doc.para("quoted from the CLAD paper")\n', names)         # prose naming a paper
    assert named('headline("in9")\n', names)                                 # a family
    assert not named('"""Ge et al.\'s rows, as CLAD names them."""\n# clad\nx = 1\n', names)
    assert not named('doc.para("the first 16 hex digits")\nc = {"biased": "Biased ↑"}\n', names)


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
