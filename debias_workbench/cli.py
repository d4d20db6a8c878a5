"""The `workbench` command: one subcommand per thing a user or a rule runs.

    workbench verify STORE ...            recompute stores' content fingerprints
    workbench export STORE --format F --out DIR
                                          a variant as an image folder or WebDataset shards, with a card
    workbench report --config ...         build the report (the workflow's `report` rule)
    workbench generate STEP --family ...  one dataset-generation step (the generation rules)
    workbench train | prerequisite | evaluate | evaluate-imagenet | analyse ...
                                          training, scoring and analysis jobs (their rules)
    workbench config-reference [--check]  regenerate docs/configuration.md from config/schema.yaml
    workbench plan --configfile F [--json] every run, job and request of a config and its cost, before any data

Each subcommand's module is imported only when it runs, so `workbench verify` does not load torch.
"""

from __future__ import annotations

import importlib
import sys

#: subcommand -> ("module:function", one-line help); the function takes the arguments after the subcommand
COMMANDS: dict[str, tuple[str, str]] = {
    "verify": ("debias_workbench.pipeline.cli:verify", "recompute stores' content fingerprints"),
    "export": ("debias_workbench.pipeline.cli:export", "a variant store as imagefolder or webdataset, with a card"),
    "report": ("debias_workbench.report.cli:main", "build the report from tidy metric rows"),
    "generate": ("debias_workbench.pipeline.cli:generate", "one dataset-generation step"),
    "train": ("debias_workbench.training.cli:train", "train the runs of one job"),
    "prerequisite": (
        "debias_workbench.training.cli:prerequisite",
        "build a prerequisite artifact a method needs before its runs train",
    ),
    "evaluate": ("debias_workbench.training.cli:evaluate", "score trained runs on their test sets"),
    "evaluate-imagenet": ("debias_workbench.training.cli:evaluate_imagenet", "score an ImageNet model"),
    "analyse": ("debias_workbench.training.cli:analyse", "one analysis of trained runs"),
    "config-reference": ("debias_workbench.workflow.reference:main", "regenerate docs/configuration.md"),
    "plan": ("debias_workbench.workflow.plan_text:main", "every run, job and request of a config, and what it costs"),
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    return "usage: workbench COMMAND [ARGS]\n\ncommands:\n" + "\n".join(
        f"  {name:<{width}}  {text}" for name, (_target, text) in COMMANDS.items()
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] in (["-h"], ["--help"]):
        print(usage())
        return 0
    if not argv or argv[0] not in COMMANDS:
        print((f"workbench: unknown command {argv[0]!r}\n" if argv else "") + usage(), file=sys.stderr)
        return 2
    module, function = COMMANDS[argv[0]][0].split(":")
    return getattr(importlib.import_module(module), function)(argv[1:]) or 0
