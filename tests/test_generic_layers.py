"""The generic layers name no paper, method or dataset family, nor what is theirs (issues 52 and 62).

What one paper's tables need lives with the paper (`debias_workbench/papers/<paper>/`), a method's declarations
with the method (`training/methods/<module>.yaml`), a family's with the family (`pipeline/datasets/<module>.py`:
its variants, column titles, derived metrics, checks, code rules, smoke counts, rule files), a paper's analyses
with the paper (its `workflow.py`: rule files, jobs, job-config keys, smoke counts); the generic layers
(workflow/, report/, cli.py, the Snakefile and the rule files under rules/ but a family's own) reach them through
the registries and hooks. The one walker of tests/leaks.py reads each of their files for the registered names, the
variant and test-set names, the method-argument keys, the code rules a family, method or paper owns, the values
only a family's typed view reads ("photo"), and the imports of a family's or a paper's module or of a constant
that names a variant. Comments and docstrings may name them (they say what and why).

None is left (issue 62 moved the last ones behind declarations): every leak fails."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from debias_workbench.workflow import paper_hooks
from debias_workbench.workflow.config import background_challenge_runs, resolve_config

from .leaks import ROOT, file_hits, generic_files, snakemake_words, source_hits, words_hits


@pytest.mark.parametrize("path", generic_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_a_generic_file_names_nothing_of_a_paper_method_or_family(path):
    found = [str(hit) for hit in file_hits(path)]
    assert not found, "a generic layer names what a paper, method or dataset family owns:\n" + "\n".join(found)


def test_the_walk_covers_every_generic_layer_but_a_familys_or_a_papers_own_rule_files():
    walked = {str(p.relative_to(ROOT)) for p in generic_files()}
    assert {"Snakefile", "debias_workbench/cli.py", "rules/common.smk", "rules/runs.smk"} <= walked
    assert {"debias_workbench/workflow/checks.py", "debias_workbench/report/context.py"} <= walked
    # in9's own (In9Family.rule_files), and the papers' own (their analyses: paper_hooks.rule_files)
    assert not {"rules/in9_common.smk", "rules/in9_data.smk", "rules/in9_derived.smk"} & walked
    papers = {str(Path(f).relative_to(ROOT)) for f in paper_hooks.rule_files()}
    assert {"debias_workbench/papers/clad/analyses.smk", "debias_workbench/papers/rebias/analyses.smk"} <= papers
    assert not papers & walked and all(Path(ROOT, f).is_file() for f in papers)


def _kinds(source: str) -> set[tuple[str, str]]:
    return {(hit.kind, hit.name) for hit in source_hits(source)}


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ('x = config["method"] in ("clad", "clad_plus")', ("registered", "clad")),  # a method, as a string
        ("def _in9_datasets(config): ...", ("registered", "in9")),  # a family, inside an identifier
        ('PRELOAD = ("pipeline.datasets.in9",)', ("registered", "in9")),  # a family, inside a module name
        ('if grid["report"] == "park_ablation": ...', ("registered", "park")),  # a paper, inside a string
        ('TABLE = "CLAD Table 5"', ("registered", "clad")),  # any case, in prose
        ("from debias_workbench.papers.park.workflow import CHECKS", ("import", "paper park")),  # a paper's module
        ('ORDER = ("base_in9", "s_clad")', ("registered", "s_clad")),  # a role of a paper's table
        ('x = table["clad_table2"]', ("registered", "clad")),  # a paper's numbers
        ("def byol_runs(config):\n    return BYOL_METHODS", ("registered", "byol")),  # an identifier
        ('doc.para("quoted from the CLAD paper")', ("registered", "clad")),  # prose naming a paper
        ('columns = headline("in9")', ("registered", "in9")),  # a family
        # the side doors issue 62's review found, as they were written
        ('if "mixed_same" in accs and "mixed_rand" in accs: ...', ("variant", "mixed_same")),  # BG-GAP in context.py
        ('COLUMN_TITLES = {"biased": "Biased ↑", "unbiased": "Unbiased ↑"}', ("variant", "unbiased")),  # helpers.py
        ("from debias_workbench.pipeline.variants import EXTERNAL", ("import", "imagenet_sketch")),  # checks.py
        ("from debias_workbench.pipeline.variants import BG_CONFLICT", ("import", "bg_conflict_")),  # a prefix
        ('PHOTO_TRAIN_VARIANTS = ("original", "texture")', ("variant", "texture")),  # checks.py
        ('photos = ds.get("train_views") == "photo"', ("setting value", "photo")),  # the raw string
        (
            's = committee_seconds(ds, args["committee_size"], args["committee_steps"])',
            ("method argument", "committee_steps"),
        ),  # resources.py
        (
            'CODE_RULES = {"leftover_colours": "spread evenly over the other colours"}',
            ("code rule", "leftover_colours"),
        ),  # protocol.py's Biased MNIST rule
        (
            "from debias_workbench.pipeline.datasets.in9_config import PHOTO_TRAIN_VARIANTS",
            ("import", "family module in9_config"),
        ),
    ],
)
def test_the_walker_finds_a_name_written_by_hand(source, found):
    assert found in _kinds(source)


def test_the_walker_reads_a_rule_file_but_its_comments_and_rule_docstrings():
    source = (
        'include: "rules/in9_data.smk"\n\nrule x:\n    """Mixed-Rand of mixed_rand, in a docstring."""\n'
        '    input:\n        f"{R}/datasets/{DS}/mixed_rand.zarr",  # texture, in a comment\n'
        '    params:\n        args=lambda wc: ARGS["committee_vote"],\n'
    )
    hits = {(hit.kind, hit.name, hit.line) for hit in words_hits("x.smk", snakemake_words(source))}
    assert hits == {("registered", "in9", 1), ("variant", "mixed_rand", 6), ("method argument", "committee_vote", 8)}


def test_the_walker_leaves_docstrings_comments_longer_words_and_short_names_in_prose():
    assert not _kinds('"""CLAD and in9 in a docstring."""\n# clad in a comment\nx = "hexdigest term parking"\n')
    assert not _kinds('def f():\n    """Ge et al.\'s rows, as CLAD names them."""\n    return 1\n')
    assert not _kinds('doc.para("the first 16 hex digits")\n')  # `hex` (a method) in prose: too short to count
    assert ("registered", "clad") in _kinds('doc.para("quoted from the CLAD paper")\n')  # a long one counts
    assert not _kinds('x = "the alpha of the plot"\n')  # a method argument's key counts in code only
    assert ("method argument", "alpha") in _kinds('x = args["alpha"]\n')


def test_each_declared_analysis_is_a_rule_of_its_papers_own_rule_files(default_config):
    """What a paper declares of its analyses is its own: each job it declares (`ANALYSIS_JOBS`) is made by a rule
    of a file it lists (`RULE_FILES`), and has the keys of its job config (`ANALYSIS_KEYS`)."""
    default_config["analyses"]["texture"].update(experiments=["base_in9"], vgg="vgg_normalised.pth")
    config = resolve_config(default_config)
    declared = set()
    for module in paper_hooks.paper_workflow_modules():
        own = "".join(Path(str(module.__file__)).with_name(f).read_text() for f in getattr(module, "RULE_FILES", ()))
        for jobs in getattr(module, "ANALYSIS_JOBS", ()):
            for job in jobs(config, background_challenge_runs(config)):
                assert re.search(rf"^rule {job.rule}:", own, re.M) and job.name in module.ANALYSIS_KEYS, job
                declared.add(job.name)
    assert declared == {"consistency", "fivecrop", "saliency", "texture"}
