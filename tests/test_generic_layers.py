"""The generic layers name no paper, method or dataset family (issue 52: a paper is one folder).

What one paper's tables need lives with the paper (`debias_workbench/papers/<paper>/`), a method's
declarations with the method (`training/methods/<module>.yaml`), a family's with the family
(`pipeline/datasets/<module>.py`); the workflow layer reaches them through the registries and hooks.
So no string literal or identifier of a module under `debias_workbench/workflow/` may name one of
them: the names are taken from the registries (methods, dataset families) and the paper folders.
Comments and docstrings may name them (they say what and why)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from debias_workbench.pipeline.datasets import REGISTRY as FAMILIES
from debias_workbench.training.methods import REGISTRY as METHODS

PACKAGE = Path(__file__).resolve().parents[1] / "debias_workbench"
#: the layers that hold no paper, method or family knowledge
GENERIC_LAYERS = ("workflow",)


def paper_names() -> set[str]:
    return {p.name for p in (PACKAGE / "papers").iterdir() if p.is_dir() and not p.name.startswith("_")}


def known_names() -> set[str]:
    return set(METHODS) | set(FAMILIES) | paper_names()


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring nodes of a module, its classes and functions."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _texts(node: ast.AST, docstrings: set[int]) -> list[str]:
    """The identifiers a node introduces or reads, or its string, if any (a docstring: none)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
        return [node.value]
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        return [node.attr]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.arg):
        return [node.arg]
    if isinstance(node, ast.keyword) and node.arg:
        return [node.arg]
    if isinstance(node, ast.alias):
        return [node.name, node.asname or ""]
    if isinstance(node, ast.ImportFrom) and node.module:
        return [node.module]
    return []


def named(source: str, names: set[str]) -> Iterator[tuple[int, str, str]]:
    """(line, name, text) for every string literal or identifier of `source` in which a name occurs as a
    word (between non-alphanumeric characters: `_`, `.`, spaces; any case), comments and docstrings aside."""
    pattern = re.compile(
        r"(?<![a-z0-9])(" + "|".join(sorted(map(re.escape, names), key=len, reverse=True)) + r")(?![a-z0-9])", re.I
    )
    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    for node in ast.walk(tree):
        for text in _texts(node, docstrings):
            for match in pattern.finditer(text):
                yield getattr(node, "lineno", 0), match.group(1).lower(), text


def _modules() -> list[Path]:
    return sorted(p for layer in GENERIC_LAYERS for p in (PACKAGE / layer).rglob("*.py"))


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_a_generic_module_names_no_paper_method_or_family(path):
    module = str(path.relative_to(PACKAGE))
    found = [f"{module}:{line}: {name!r} in {text[:80]!r}" for line, name, text in named(path.read_text(),
                                                                                          known_names())]
    assert not found, "a generic layer names a paper, method or dataset family:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "source",
    [
        'x = config["method"] in ("clad", "clad_plus")',  # a method, as a string
        "def _in9_datasets(config): ...",  # a family, inside an identifier
        'PRELOAD = ("pipeline.datasets.in9",)',  # a family, inside a module name
        'if grid["report"] == "park_ablation": ...',  # a paper, inside a string
        'TABLE = "CLAD Table 5"',  # any case
        "from debias_workbench.papers.park.workflow import CHECKS",  # a paper's module
    ],
)
def test_the_scan_finds_a_name_written_by_hand(source):
    assert list(named(source, known_names()))


def test_the_scan_leaves_comments_docstrings_and_longer_words():
    source = '"""CLAD and in9 in a docstring."""\n# clad in a comment\nx = "hexdigest term parking"\n'
    assert not list(named(source, known_names()))
