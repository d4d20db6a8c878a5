"""`AnalysisJob`: one analysis of trained models that a paper declares to the workflow (its `workflow.py`'s
`ANALYSIS_JOBS`, read by `workflow.paper_hooks`), in core so that a paper declares it without importing the
workflow layer, which imports the papers' declarations."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AnalysisJob:
    """The job of analysis `name` (`workbench analyse --analysis <name>`, its rows in
    `<results>/analysis/<name>.jsonl`), made by rule `rule` of its paper's rule file: `keyed` where the
    rule's one wildcard is the analysis (a rule for several analyses); its estimate (`workflow.resources.evaluation`)
    from the `stores` it reads per model and its models, the runs of `experiments` plus `extra_models`
    networks of its own (a fixed feature extractor)."""

    rule: str
    name: str
    experiments: tuple[str, ...]
    stores: int
    keyed: bool = False
    extra_models: int = 0
