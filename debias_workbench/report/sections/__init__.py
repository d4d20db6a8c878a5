"""The report's sections, in the order they appear (`sections()`): the introduction, every registered
paper's sections among the main evaluation dataset's tables (`papers.PAPERS`, in registry order),
the other runs, the papers' grid reports, then the data and training. A generic section is one
function `render(doc, ctx)` in a module here plus one `Section` line below; a paper's sections are
declared by the paper (`Paper.sections`).

A section that tables trained models declares the model-selection rule(s) it shows
(`report.model_selection`); the report writes that rule under the section.
"""

from __future__ import annotations

from debias_workbench.papers import PAPERS

from ..section import Section
from . import datasets, intro, runs

#: the generic sections before the papers' main tables, between those and their grid reports, and after
BEFORE = (Section("intro", intro.intro),)
BETWEEN = (Section("other_runs", runs.other_runs, ("last",)),)
AFTER = (
    Section("variant_grid", datasets.variant_grid),
    Section("segmentation_quality", datasets.segmentation_quality),
    Section("manifests", datasets.manifests),
    Section("training", datasets.training),
)


def paper_sections(part: str) -> list[Section]:
    """The registered papers' sections of `part` (`section.PARTS`), papers in registry order."""
    return [s for name in PAPERS for s in PAPERS[name].sections if s.part == part]


def sections() -> list[Section]:
    """Every section of the report, in order."""
    return [*BEFORE, *paper_sections("main"), *BETWEEN, *paper_sections("grids"), *AFTER]
