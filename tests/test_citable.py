"""What people who cite and build on the project need is there and says the same thing everywhere:
the licence the package declares is the LICENSE file's, CITATION.cff and CHANGELOG.md name the
package's version, and the package ships its type hints (PEP 561's `py.typed`).

The bug this catches: a version bumped in one place and not in another (a citation of 0.2.0 for a
0.3.0 release), or a `py.typed` dropped from the package data, so that type checkers of dependent
projects silently stop reading our hints.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

import debias_workbench

ROOT = Path(__file__).resolve().parents[1]


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_licence_file_is_the_declared_licence():
    project = _pyproject()["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text().splitlines()[0] == "MIT License"


def test_citation_names_the_package_version_and_its_papers():
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert citation["cff-version"] == "1.2.0"
    assert str(citation["version"]) == debias_workbench.__version__
    assert citation["license"] == _pyproject()["project"]["license"]
    titles = [ref["title"] for ref in citation["references"]]
    for paper in ("CLAD", "Diminished Semantics", "De-biased Representations", "Intrinsic Features"):
        assert any(paper in title for title in titles), f"CITATION.cff cites no paper with {paper!r}"
    for ref in citation["references"]:
        assert ref["authors"] and ref["year"], f"CITATION.cff: {ref['title']!r} lacks authors or year"


def test_changelog_opens_with_the_package_version():
    first = re.search(r"^## (\S+)", (ROOT / "CHANGELOG.md").read_text(), re.M)
    assert first and first.group(1) == debias_workbench.__version__


def test_package_ships_its_type_hints():
    assert (Path(debias_workbench.__file__).parent / "py.typed").is_file()
    assert "py.typed" in _pyproject()["tool"]["setuptools"]["package-data"]["debias_workbench"]
