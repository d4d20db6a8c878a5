"""Helpers shared by the report's sections: reading tidy rows, aggregating over seeds, figures."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from debias_workbench.core.atomic import atomic_path  # noqa: E402
from debias_workbench.core.names import IMAGENET_EXPERIMENT, IMAGENET_LABEL  # noqa: E402
from debias_workbench.core.statistics import mean_interval, run_value  # noqa: E402
from debias_workbench.pipeline.datasets import column_title, get_family  # noqa: E402

from .roles import all_roles  # noqa: E402


def headline(family: str) -> tuple[list[str], list[str]]:
    """(columns, titles) of the results table of a dataset family: the test sets and metrics the
    family declares (`DatasetFamily.headline`), titled as it declares (`DatasetFamily.column_titles`)."""
    columns = list(get_family(family).headline)
    return columns, [column_title(c, family) for c in columns]


#: a reference model "learns the task" when its accuracy is this many points above chance
CAPABLE_MARGIN = 20.0


def capability_line(model: str, where: str, values: list[float], chance: float, task: str) -> tuple[bool, str]:
    """(capable, sentence): does the reference model learn the task at all? It does when the 95 %
    interval of its mean (`core.statistics.mean_interval`: seeds and test images) lies wholly
    `CAPABLE_MARGIN` points above chance; when the interval straddles that line (one seed, a
    handful of test images) the report cannot tell. A benchmark on which it does not learn, or
    cannot be seen to, cannot tell a working method from a broken one, so comparisons built on
    it are reported as not informative."""
    bar = chance + CAPABLE_MARGIN
    ci = mean_interval(values)
    state = _learns(values, chance)
    capable = state == "learns"
    if capable:
        judged = f"it learns {task}, so the comparison below can judge the methods."
    elif state == "does not learn":
        judged = (
            f"it does not learn {task}, so this benchmark cannot tell a working method from a broken one: the "
            "verdict below is **not informative**."
        )
    else:
        judged = (
            f"cannot tell whether it learns {task} (the interval reaches below {bar:.1f} %), so the verdict below "
            "is **not informative**."
        )
    interval = (
        f"95 % CI {ci.low:.1f} to {ci.high:.1f}; "
        if values and math.isfinite(ci.low)
        else "one seed, test-image error unknown: no interval; "
        if values
        else ""
    )
    return capable, (
        f"Capability check: {model} reaches {mean_std(values)} % {where} ({interval}chance "
        f"{chance:.1f} %; the check asks for the interval to lie {CAPABLE_MARGIN:.0f} points above chance): " + judged
    )


def _learns(values: list[float], chance: float) -> str:
    """ "learns" where the 95 % interval of the mean lies wholly `CAPABLE_MARGIN` points above chance,
    "does not learn" where it lies wholly below that line, else "cannot tell" (`capability_line`)."""
    bar, ci = chance + CAPABLE_MARGIN, mean_interval(values)
    return "learns" if values and ci.low >= bar else "does not learn" if values and ci.high < bar else "cannot tell"


def failed_check(model: str, values: list[float], chance: float, task: str) -> str:
    """Why a comparison whose reference fails its capability check (`capability_line`) is not judged, in
    a few words for the report's verdict summary."""
    if _learns(values, chance) == "does not learn":
        return f"capability check: {model} does not learn {task}"
    return f"capability check: cannot tell whether {model} learns {task}"


#: fewest images (counted decisions) a per-run value needs before the report prints it. The shape
#: bias counts only the cue-conflict images classified as the shape or the texture class, which can
#: be a handful: one image gives 0 or 100 %, and with 30 the binomial standard error is at most
#: 9 points (50 % / sqrt(30)), coarse but comparable between models.
MIN_IMAGES = 30


def too_few_column(metric: str) -> str:
    """The table column beside `metric` that holds, per seed whose value rests on fewer than
    `MIN_IMAGES` images, that number of images (the value itself is kept out of the table)."""
    return f"{metric}_too_few"


def counted_values(
    rows: list[dict[str, Any]], metric: str, labels: dict[str, str]
) -> dict[str, dict[str, list[float]]]:
    """{model label: {metric: [value per seed from at least `MIN_IMAGES` images], too_few_column(metric):
    [number of images per seed from fewer]}} of the eval rows of `metric` (`labels`: experiment ->
    label). Rows without a count (`n` None) are kept; a NaN value has n = 0, so it lands with the few."""
    out: dict[str, dict[str, list[float]]] = defaultdict(lambda: {metric: [], too_few_column(metric): []})
    for r in sorted(rows, key=lambda r: (r.get("experiment", ""), r.get("seed", 0))):
        if r.get("kind") == "eval" and r["metric"] == metric:
            cols = out[labels.get(r["experiment"], r["experiment"])]
            if r.get("n") is None or r["n"] >= MIN_IMAGES:
                cols[metric].append(run_value(r))
            else:
                cols[too_few_column(metric)].append(r["n"])
    return dict(out)


def value_cell(cols: dict[str, list[float]], column: str, digits: int = 1) -> str:
    """A table cell of `column`: mean ± std over the seeds with enough images; "too few images (n)"
    where every seed rests on fewer than `MIN_IMAGES` (n per seed), and the seeds left out are named
    after the number where only some do."""
    values, few = cols.get(column, []), cols.get(too_few_column(column), [])
    if not few:
        return mean_std(values, digits)
    text = f"too few images ({', '.join(str(int(n)) for n in few)})"
    return f"{mean_std(values, digits)}; {len(few)} seed(s) left out, {text}" if values else text


def worst_group_cell(values: list[float]) -> str:
    """ "12.5 ± 3.1 (n = 8; 95 % CI 4.8 to 20.2)": a worst-group accuracy over seeds with the size of
    the worst group (`RunValue.n`, a range where the seeds' worst groups differ) and its interval."""
    if not values:
        return "–"
    sizes = sorted({n for v in values if (n := getattr(v, "n", None)) is not None})
    size = "" if not sizes else f"n = {sizes[0]}" if len(sizes) == 1 else f"n = {sizes[0]}–{sizes[-1]}"
    ci = mean_interval(values)
    interval = f"95 % CI {ci.low:.1f} to {ci.high:.1f}" if math.isfinite(ci.low) else "no interval"
    return f"{mean_std(values)} ({'; '.join(p for p in (size, interval) if p)})"


def read_rows(paths: list[Path]) -> list[dict[str, Any]]:
    rows = []
    for path in paths:
        rows += [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    return rows


def mean_std(values: list[float], digits: int = 1) -> str:
    if not values:
        return "–"
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{np.mean(values):.{digits}f} ± {np.std(values, ddof=1):.{digits}f}"


def experiment_labels(config: dict[str, Any]) -> dict[str, str]:
    """{experiment: display label}, the ImageNet model's row included."""
    return {IMAGENET_EXPERIMENT: IMAGENET_LABEL, **{name: exp["label"] for name, exp in config["experiments"].items()}}


def by_label(table: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    """A table keyed by experiment, re-keyed by display label (labels are unique per experiment:
    the config check guarantees it, so no two experiments' numbers can merge here)."""
    out: dict[str, Any] = defaultdict(lambda: defaultdict(list))
    for experiment, cols in table.items():
        label = labels.get(experiment, experiment)
        if label in out:
            raise ValueError(f"experiments {experiment!r} and another share the label {label!r}")
        out[label] = cols
    return out


def metric_table(
    rows: list[dict[str, Any]], kind: str, analysis: str | None = None
) -> dict[str, dict[str, list[float]]]:
    """{model label: {metric: [value per seed]}} of the rows of `kind` (and `analysis`),
    aggregated per experiment and shown under the label the report attached to its rows."""
    table: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    labels = {}
    for r in sorted(rows, key=lambda r: (r.get("experiment", r["label"]), r.get("seed", 0))):
        if r.get("kind") == kind and (analysis is None or r.get("analysis") == analysis):
            experiment = r.get("experiment", r["label"])
            labels[experiment] = r["label"]
            table[experiment][r["metric"]].append(run_value(r))
    return by_label(table, labels)


def model_order(labels, roles: dict[str, str]) -> list[str]:
    """`labels` in the papers' table order: the ImageNet model, then the models playing the papers'
    roles in their row order (`roles`: role -> label, `report.roles.all_roles`; a model two papers
    name comes where the first does), then the others by label."""
    labels = list(labels)
    preferred = list(dict.fromkeys([IMAGENET_LABEL, *(roles[r] for r in all_roles() if r in roles)]))
    return [m for m in preferred if m in labels] + sorted(m for m in labels if m not in preferred)


def save_figure(fig, path: Path, dpi: int) -> None:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=dpi, format="png")
    plt.close(fig)


def sweep_only_experiments(config: dict[str, Any]) -> set[str]:
    """Experiments that exist only as sweep points (shown in the sweep figures, not the tables)."""
    return {
        e
        for name, sweep in config.get("sweep_points", {}).items()
        for _, e in sweep["points"]
        if e != config["sweeps"][name]["experiment"]
    }
