"""The papers' workflow declarations, collected so that the generic workflow layer names no paper:
each registered paper (`debias_workbench.papers.REGISTRY`) may have a `workflow` module beside the module
of its `PAPER` (`report`) declaring any of

* `EXPANSIONS`: functions config -> config adding the runs its tables need (CLAD Table 5's U2-Net runs),
  applied after scope and smoke mode, before the sweeps and grids;
* `CHECKS`: functions config -> problems, each naming its dotted key (run with the cross-reference checks);
* `GRID_REPORT_KINDS`: the `grids.<name>.report` values its sections accept (the schema's enum);
* `FIGURE_VARIANT_KINDS`: those of them whose figures show one train variant (`grids.<name>.figure_variant`
  is then required);
* `RUN_TABLES`: functions expanded config -> {experiment: table} for runs its expansions add
  (`workbench plan` groups them under it);
* `CODE_RULES`: {rule: value} of the code its runs execute where no setting chooses and that no dataset family
  or method declares as its own (its protocol names them as `code:<rule>`: `workflow.protocol.code_rules`);
* `RULE_FILES`: the Snakemake files beside the module that hold its rules (its analyses), which the Snakefile
  includes after the generic rules the report's does not read;
* `ANALYSIS_JOBS`: functions (expanded config, the Background Challenge runs) -> the `core.analysis_job.AnalysisJob`
  its rule files run in that config (`workbench plan` lists them, rules/common.smk names their job configs);
* `ANALYSIS_KEYS`: {analysis: the keys of the `analyses` section its job config holds} (`workflow.slices`);
* `SMOKE`: functions config -> None shrinking its own sections of a smoke config in place (`workflow.smoke`).

Read in the registry's order; the module imports only the layers below the workflow, never the report's
code that the paper's package itself imports."""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from debias_workbench.core.analysis_job import AnalysisJob
from debias_workbench.papers import PAPERS

Config = dict[str, Any]
#: the module beside a paper's `PAPER` that holds its workflow declarations
WORKFLOW_MODULE = "workflow"


def _workflow_modules() -> dict[str, ModuleType]:
    """{paper: its `workflow` module} of the registered papers that have one (papers without one declare nothing
    to the workflow); not cached, so that a paper registered later (a test's toy paper) is seen."""
    dotted = {name: f"{PAPERS.module_of(name).rpartition('.')[0]}.{WORKFLOW_MODULE}" for name in PAPERS}
    return {
        name: importlib.import_module(module)
        for name, module in dotted.items()
        if importlib.util.find_spec(module) is not None
    }


def paper_workflow_modules() -> tuple[ModuleType, ...]:
    """Each registered paper's `workflow` module, in the registry's order."""
    return tuple(_workflow_modules().values())


def _declared(attribute: str) -> tuple[Any, ...]:
    """Every paper's `attribute` tuple, concatenated in the papers' order."""
    return tuple(item for module in paper_workflow_modules() for item in getattr(module, attribute, ()))


def expansions() -> tuple[Callable[[Config], Config], ...]:
    return _declared("EXPANSIONS")


def checks() -> tuple[Callable[[Config], list[str]], ...]:
    return _declared("CHECKS")


def grid_report_kinds() -> tuple[str, ...]:
    return _declared("GRID_REPORT_KINDS")


def figure_variant_kinds() -> tuple[str, ...]:
    return _declared("FIGURE_VARIANT_KINDS")


def run_tables() -> tuple[Callable[[Config], dict[str, str]], ...]:
    return _declared("RUN_TABLES")


def code_rules() -> dict[str, dict[str, Any]]:
    """{paper: its `CODE_RULES`} of the papers that declare any."""
    declared = {name: getattr(module, "CODE_RULES", {}) for name, module in _workflow_modules().items()}
    return {name: rules for name, rules in declared.items() if rules}


def rule_files() -> tuple[str, ...]:
    """Every paper's `RULE_FILES`, as paths beside its `workflow` module, in the papers' order."""
    modules = paper_workflow_modules()
    return tuple(str(Path(str(m.__file__)).with_name(name)) for m in modules for name in getattr(m, "RULE_FILES", ()))


def analysis_jobs(config: Config, main_runs: list[str]) -> list[AnalysisJob]:
    """The analyses every paper runs in an expanded `config` (`main_runs`: its Background Challenge runs,
    `workflow.config.background_challenge_runs`), in the papers' order."""
    return [job for jobs in _declared("ANALYSIS_JOBS") for job in jobs(config, main_runs)]


def analysis_keys(analysis: str) -> tuple[str, ...]:
    """The keys of the `analyses` section that `analysis`'s job config holds (its paper's `ANALYSIS_KEYS`)."""
    keys = [getattr(module, "ANALYSIS_KEYS", {}) for module in paper_workflow_modules()]
    declared = [own[analysis] for own in keys if analysis in own]
    if len(declared) != 1:
        raise KeyError(f"analysis {analysis!r} is declared by {len(declared)} papers' ANALYSIS_KEYS, not one")
    return tuple(declared[0])


def smoke_shrinks() -> tuple[Callable[[Config], None], ...]:
    return _declared("SMOKE")


def expand(config: Config) -> Config:
    """`config` with every paper's expansions applied, in the papers' order."""
    for expansion in expansions():
        config = expansion(config)
    return config
