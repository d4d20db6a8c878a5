"""What Park et al.'s tables need from the workflow: the grid report kinds they fill (Tables 1-2 with
Fig. 2; Table 3's ablation) and the check that such a grid can fill them (collected by
`workflow.paper_hooks`; the generic layers name no paper). Like every paper's workflow module it imports
only the layers below the workflow (core, pipeline, training): the workflow layer imports it."""

from __future__ import annotations

from typing import Any

from debias_workbench.pipeline.datasets import family_name, get_family

Config = dict[str, Any]

#: `grids.<name>.report` kinds of Park et al.'s sections: Tables 1-2 and Fig. 2; Table 3 (the ablation)
GRID_REPORT_KINDS = ("park", "park_ablation")
#: Table 2 and Fig. 2 show the runs of one train variant (`figure_variant`)
FIGURE_VARIANT_KINDS = GRID_REPORT_KINDS
#: the test sets the tables read: validation-selected and oracle accuracy on the unbiased set
NEEDED_TEST_SETS = ("valid", "unbiased")


def grid_report_problems(config: Config) -> list[str]:
    """A grid reported in Park et al.'s tables scores a dataset with `valid` and `unbiased` test sets,
    with `model_selection` (the tables give the validation-selected and the oracle accuracy)."""
    problems = []
    for name, grid in config.get("grids", {}).items():
        if grid.get("report") not in GRID_REPORT_KINDS or grid["dataset"] not in config["datasets"]:
            continue
        ds = config["datasets"][grid["dataset"]]
        sets = get_family(family_name(ds)).test_sets(ds, grid["train_variants"][0])
        if set(NEEDED_TEST_SETS) - set(sets) or not grid.get("model_selection"):
            problems.append(
                f"grids.{name}.report: {grid['report']} needs a dataset with `valid` and `unbiased` test sets (a "
                f"colored_mnist one; {grid['dataset']!r} has {sorted(sets)}) and `model_selection`"
            )
    return problems


CHECKS = (grid_report_problems,)
