"""What Park et al.'s tables read of a grid and how they compare its rows: each (train variant, method)
cell's test metric validation-selected and best-test ("oracle", `report.model_selection`), a train
variant's share of bias-conflicting samples, the seeds per row, the capability check on Vanilla, and
each comparison of two rows recorded as a verdict (or as not informative). Table 1 (`tables`) and
Table 3 (`ablation`) share them."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from debias_workbench.core.statistics import difference
from debias_workbench.report import model_selection
from debias_workbench.report.document import Document
from debias_workbench.report.helpers import capability_line, failed_check

#: the test set the tables score and the one model selection looks at (the colored_mnist family's)
TEST, VALID = "unbiased", "valid"


PARK_METHOD = "intrinsic_feature_enhancement"


def selected_and_oracle(
    rows: list[dict[str, Any]], config: dict[str, Any], grid: str, metric: str
) -> dict[tuple[str, str], dict[str, list[float]]]:
    """{(train variant, method key): {"selected": [...], "oracle": [...]}} per seed: the test
    `metric` under `model_selection`'s rules "validation" and "oracle" (the scoring points are
    the model-selection curve rows plus the final evaluation)."""
    runs = {e for e, exp in config["experiments"].items() if exp.get("grid") == grid}
    out: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: {"selected": [], "oracle": []})
    for kind, rule in (("selected", "validation"), ("oracle", "oracle")):
        for experiment, values in model_selection.selected(rows, runs, TEST, metric, rule, VALID).items():
            exp = config["experiments"][experiment]
            out[(exp["train_variant"], exp["grid_method"])][kind] = values
    return out


def percent(variant: str) -> float:
    """p of `conflict_<p>` (Colored MNIST, Waterbirds, BFFHQ, BAR) and of `bg_conflict_<p>` (IN-9)."""
    return float(variant.rsplit("_", 1)[1])


def seeds_per_row(config: dict[str, Any], grid: str) -> str:
    """ "3 seeds (Vanilla, LfF+BE, Ours), 1 seed (ReBias, LfF)": the rows grouped by their seed count."""
    n_seeds = {
        exp["grid_method"]: len(exp["seeds"]) for exp in config["experiments"].values() if exp.get("grid") == grid
    }
    groups: dict[int, list[str]] = defaultdict(list)
    for key, method in config["grids"][grid]["methods"].items():
        groups[n_seeds.get(key, 0)].append(method["label"])
    if len(groups) == 1:
        return f"{next(iter(groups))} seed(s)"
    return ", ".join(
        f"{n} seed{'s' if n > 1 else ''} ({', '.join(labels)})" for n, labels in sorted(groups.items(), reverse=True)
    )


def num_classes(config: dict[str, Any], dataset: str) -> int:
    return len(config["datasets"][dataset].get("classes", range(10)))


def capability(
    doc: Document, grid: dict[str, Any], conflicting, variants: list[str], chance: float
) -> tuple[bool, str]:
    """Writes the capability line: does the grid's Vanilla (validation-selected) learn the digits beyond
    their colour on the bias-conflicting test samples at the largest ratio? (capable, why not where not);
    not capable without a Vanilla."""
    vanilla = next((key for key, m in grid["methods"].items() if m["method"] in ("vanilla", "erm")), None)
    if vanilla is None:
        doc.para("No Vanilla run in this grid: nothing shows that the benchmark can judge.")
        return False, "no Vanilla run to check the benchmark"
    hardest = variants[-1]  # the most conflicting samples: the easiest setting
    label, task = grid["methods"][vanilla]["label"], "the classes beyond their bias"
    values = conflicting.get((hardest, vanilla), {}).get("selected", [])
    capable, line = capability_line(
        label,
        f"on the bias-conflicting samples of the {TEST} test set, trained at "
        f"{percent(hardest):g} % conflicting (validation-selected)",
        values,
        chance,
        task,
    )
    doc.para(line)
    return capable, "" if capable else failed_check(label, values, chance, task)


def versus(doc: Document, grid: dict[str, Any], cells: dict, variant: str, key: str, other: str) -> str:
    """The interval and verdict of row `key` minus row `other`, validation-selected, at one ratio, recorded
    as the section's verdict."""
    judged = difference(
        cells.get((variant, key), {}).get("selected", []), cells.get((variant, other), {}).get("selected", [])
    )
    doc.verdict(f"{_comparison(grid, key, other)}, {percent(variant):g} % conflicting", judged)
    return judged.text()


def _comparison(grid: dict[str, Any], key: str, other: str) -> str:
    """ "Ours (Park et al.) vs LfF+BE (validation-selected)": the comparison of rows `key` and `other`."""
    return f"{grid['methods'][key]['label']} vs {grid['methods'][other]['label']} (validation-selected)"


def not_judged(doc: Document, grid: dict[str, Any], pairs: list[tuple[str, str]], reason: str) -> None:
    """Records each (row, other row) comparison of `pairs` as not informative, for `reason`."""
    for key, other in pairs:
        doc.no_verdict(_comparison(grid, key, other), reason)
