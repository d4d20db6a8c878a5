"""The one walker of the leak tests (issue 62): what a generic layer's source names that belongs to a paper, a
method or a dataset family. tests/test_generic_layers.py runs it over every generic layer (workflow/, report/,
cli.py, the Snakefile and the rule files but a family's own), tests/test_paper_units.py over the report.

It reads every identifier and string literal of a Python module (its syntax tree: docstrings and comments are
prose about the code, not code) and every name and string token of a Snakemake file (comments dropped, a string
standing alone as a statement taken for a docstring), and looks in each for

* the registered names: papers (their folders), methods, dataset families;
* the variant and test-set names the families build (every shipped config's datasets, and each family schema's
  `variants` enum and `external` test sets), the names of their derived and counted metrics;
* the keys of the methods' arguments (`method_args`) and of the code rules the families, methods and papers
  declare (`code:<rule>`), in code only: identifiers and strings without spaces;
* the values of a family's settings that a typed view reads (`TrainPhotos.SETTING`'s value, "photo"), as a
  string of their own;

and, for a Python module, what it imports from the package: a family's or a paper's module, or a constant whose
value names a variant (a side door: `from ..variants import EXTERNAL`)."""

from __future__ import annotations

import ast
import functools
import importlib
import io
import keyword
import re
import tokenize
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml

from debias_workbench.papers import REGISTRY as PAPERS
from debias_workbench.pipeline.datasets import REGISTRY as FAMILIES
from debias_workbench.pipeline.datasets import family_name, get_family
from debias_workbench.pipeline.datasets import rule_files as family_rule_paths
from debias_workbench.pipeline.imageio import TrainPhotos
from debias_workbench.training.methods import REGISTRY as METHODS
from debias_workbench.training.methods import spec as method_spec

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "debias_workbench"

#: test-set names that are also the plain words of generic code ("valid": the train variant's own val split,
#: which every family may have; a check's `valid` config)
GENERIC_WORDS = frozenset({"valid"})
#: in prose (a string with spaces), only names this long count: English ("16 hex digits") is not a method
PROSE_MIN = 4


@dataclass(frozen=True)
class Word:
    """An identifier or a string of a source file: its line, its text, whether it is prose (a string with
    spaces), whether it is a string at all."""

    line: int
    text: str
    prose: bool = False
    string: bool = False


@dataclass(frozen=True)
class Hit:
    """A name `kind` ("registered", "variant", "method argument", "setting value", "import") found in `path`."""

    path: str
    line: int
    kind: str
    name: str
    text: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.kind} {self.name!r} in {self.text[:80]!r}"


def paper_names() -> set[str]:
    return {p.name for p in (PACKAGE / "papers").iterdir() if p.is_dir() and not p.name.startswith("_")} | set(PAPERS)


def registered_names() -> set[str]:
    """Every paper, method and dataset family by its registered name, less the names a family also gives a test
    set (Biased MNIST's `biased` test set is data, not the `biased` method: it is a variant name below)."""
    return (paper_names() | set(METHODS) | set(FAMILIES)) - variant_names()


def _schema_variants(node: object) -> Iterator[str]:
    """The `variants` enums of a family's schema, and the test sets it reads as released (the keys of its
    `external` section)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "variants" and isinstance(value, dict):
                yield from value.get("items", {}).get("enum", [])
            if key == "external" and isinstance(value, dict):
                yield from value.get("properties", {})
            yield from _schema_variants(value)
    elif isinstance(node, list):
        for value in node:
            yield from _schema_variants(value)


@functools.cache
def variant_names() -> frozenset[str]:
    """The variants and test sets the families build for every shipped config, each family schema's variants,
    and the columns of their derived and counted metrics."""
    from debias_workbench.workflow.config import deep_merge, resolve_config

    default = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    names: set[str] = set()
    for path in sorted((ROOT / "config").glob("*.yaml")):
        if path.name == "schema.yaml":
            continue
        config = resolve_config(deep_merge(default, yaml.safe_load(path.read_text()) or {}))
        for ds in config["datasets"].values():
            family = get_family(family_name(ds))
            for variant in family.variants(ds):
                names |= {variant, *family.test_sets(ds, variant)}
    for name in FAMILIES:
        family = get_family(name)
        names |= set(_schema_variants(family.schema())) | set(family.headline) | set(family.counted_metrics)
        names |= {n for metric in family.derived_metrics for n in (metric.column, *metric.reads)}
    return frozenset(names - GENERIC_WORDS)


@functools.cache
def method_argument_keys() -> frozenset[str]:
    """Every registered method's argument keys (Python's keywords aside: `lambda` is ReBias's λ and Python's)."""
    return frozenset(k for m in METHODS for k in method_spec(m).args if not keyword.iskeyword(k))


@functools.cache
def owned_code_rules() -> frozenset[str]:
    """The `code:` rules a family, a method or a paper declares as its own (the shared code's are
    `workflow.protocol.CODE_RULES`)."""
    from debias_workbench.workflow import paper_hooks

    rules = {r for m in METHODS for r in method_spec(m).code_rules}
    rules |= {r for n in FAMILIES for r in (*get_family(n).code_rules, *get_family(n).conditional_code_rules)}
    return frozenset(rules | {r for declared in paper_hooks.code_rules().values() for r in declared})


def setting_values() -> frozenset[str]:
    """The values of family settings that only a typed view may compare against."""
    return frozenset({TrainPhotos.SETTING.split(":", 1)[1].strip()})


def _docstrings(tree: ast.AST) -> set[int]:
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }


def python_words(source: str) -> list[Word]:
    """Every identifier (names defined and read, attributes, arguments, keywords, imported names and modules)
    and string literal of a Python module but its docstrings (comments are not in the tree)."""
    tree = ast.parse(source)
    docstrings, out = _docstrings(tree), []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            out.append(Word(line, node.value, bool(re.search(r"\s", node.value)), True))
        for attr in ("id", "attr", "name", "arg", "asname", "module"):
            text = getattr(node, attr, None)
            if isinstance(text, str) and not (attr == "name" and isinstance(node, ast.alias) and "." in text):
                out.append(Word(line, text))
            elif isinstance(text, str):  # `import a.b.c`: each part
                out += [Word(line, part) for part in text.split(".")]
    return out


def snakemake_words(source: str) -> list[Word]:
    """Every name and string token of a Snakemake file, comments dropped and a string standing alone as a
    statement (a rule's docstring) left out."""
    tokens = [t for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type != tokenize.COMMENT]
    out = []
    starts = (tokenize.NEWLINE, tokenize.NL, tokenize.INDENT, tokenize.DEDENT)
    for k, tok in enumerate(tokens):
        if tok.type == tokenize.NAME:
            out.append(Word(tok.start[0], tok.string))
        elif tok.type == tokenize.STRING:
            alone = (k == 0 or tokens[k - 1].type in starts) and (
                k + 1 < len(tokens) and tokens[k + 1].type in (tokenize.NEWLINE, tokenize.NL)
            )
            if not alone:
                body = re.sub(r"^[a-zA-Z]*('''|\"\"\"|'|\")|('''|\"\"\"|'|\")$", "", tok.string)
                out.append(Word(tok.start[0], body, bool(re.search(r"\s", body)), True))
    return out


def _pattern(names: Iterable[str]) -> re.Pattern[str]:
    """A name as a word: between characters that are not letters or digits (`_`, `.`, `/`, spaces), any case."""
    alternatives = "|".join(sorted(map(re.escape, names), key=len, reverse=True))
    return re.compile(rf"(?<![a-z0-9])({alternatives})(?![a-z0-9])", re.I)


def words_hits(path: str, words: list[Word]) -> list[Hit]:
    """The names of every kind that `words` hold (see the module's docstring for which words are read how)."""
    kinds = [
        ("registered", _pattern(registered_names()), True),
        ("variant", _pattern(variant_names()), True),
        ("method argument", _pattern(method_argument_keys()), False),
        ("code rule", _pattern(owned_code_rules()), False),
    ]
    hits = []
    for word in words:
        for kind, pattern, in_prose in kinds:
            if word.prose and not in_prose:
                continue
            for match in pattern.finditer(word.text):
                if not word.prose or len(match.group(1)) >= PROSE_MIN:
                    hits.append(Hit(path, word.line, kind, match.group(1).lower(), word.text))
        if word.string and word.text in setting_values():
            hits.append(Hit(path, word.line, "setting value", word.text, word.text))
    return hits


#: the modules of pipeline/datasets that the generic layers may import: the registry and the declaration types
SHARED_FAMILY_MODULES = ("__init__", "base")


def _owned_modules() -> dict[str, str]:
    """{dotted module: owner} of the families' modules (every module of pipeline/datasets but the registry and
    the declaration types: a family's own and those families share) and of every paper's package."""
    families = PACKAGE / "pipeline" / "datasets"
    owned = {
        f"debias_workbench.pipeline.datasets.{p.stem}": f"family module {p.stem}"
        for p in families.glob("*.py")
        if p.stem not in SHARED_FAMILY_MODULES
    }
    owned |= {f"debias_workbench.papers.{name}": f"paper {name}" for name in paper_names()}
    return owned


def _names_a_variant(value: object) -> str | None:
    """The variant a constant's value names: a variant, or the prefix of one (`bg_conflict_`), in a string or
    in a collection of them."""
    values = value if isinstance(value, (tuple, list, set, frozenset)) else (value,)
    for v in values:
        if isinstance(v, str) and v and any(n == v or (v.endswith("_") and n.startswith(v)) for n in variant_names()):
            return v
    return None


def import_hits(path: str, source: str, package: str) -> list[Hit]:
    """What a Python module (of `package`, for its relative imports) imports from a family's or a paper's own
    module, and the constants it imports whose value names a variant."""
    hits = []
    owned = _owned_modules()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            relative = "." * node.level + (node.module or "")
            module = importlib.util.resolve_name(relative, package) if node.level else relative
            targets = [(module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            targets = [(alias.name, None) for alias in node.names]
        else:
            continue
        for module, name in targets:
            full = f"{module}.{name}" if name else module
            within = (f"{full}.", f"{module}.")
            owner = next((o for m, o in owned.items() if any(w.startswith(f"{m}.") for w in within)), None)
            if owner:
                hits.append(Hit(path, node.lineno, "import", owner, full))
            elif name and module.startswith("debias_workbench"):
                value = getattr(importlib.import_module(module), name, None)
                if (named := _names_a_variant(value)) is not None:
                    hits.append(Hit(path, node.lineno, "import", named, full))
    return hits


def source_hits(source: str, path: str = "<source>", package: str = "debias_workbench.workflow") -> list[Hit]:
    """Every hit of a Python module's source (`package`: the package it lies in, for its relative imports)."""
    return words_hits(path, python_words(source)) + import_hits(path, source, package)


def file_hits(path: Path) -> list[Hit]:
    """Every hit of a generic layer's file: a Python module's words and imports, a Snakemake file's words."""
    relative, source = str(path.relative_to(ROOT)), path.read_text()
    if path.suffix == ".py":
        return source_hits(source, relative, ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1]))
    return words_hits(relative, snakemake_words(source))


def family_rule_files() -> set[str]:
    """The rule files a family declares its own (`DatasetFamily.rule_files`)."""
    return set(family_rule_paths())


def generic_files() -> list[Path]:
    """The generic layers: workflow/, report/, cli.py, the Snakefile and every rule file but a family's own."""
    modules = [p for layer in ("workflow", "report") for p in (PACKAGE / layer).rglob("*.py")]
    rules = [p for p in (ROOT / "rules").glob("*.smk") if str(p.relative_to(ROOT)) not in family_rule_files()]
    return sorted([*modules, PACKAGE / "cli.py", ROOT / "Snakefile", *rules])
