"""The matrix's capability line from a bias-free reference (issue 60): does the benchmark's recipe learn the
task at all, decided where the benchmark's bias cannot help and on images its comparisons are not scored on?

The family declares, for each train variant, its variant with the bias balanced away and the split the line is
decided on (`DatasetFamily.bias_free_reference`: IN-9's Mixed-Rand with a tenth of each class's training
images held out, Biased MNIST's digits at the unbiased ρ with held-out training digits, Colored MNIST with
every class spread over every colour and its val split of held-out training digits); the workflow trains ERM of
the benchmark's own recipe there (`reference.reference_grids`). Its accuracy on that split must lie, with its
95 % interval, 20 points above chance (`report.helpers.capability_line`, as every section's line).

A strongly biased benchmark then judges: ERM trained on the biased data may sit near chance on the unbiased
test set (that is the bias the methods exist to undo), while the same recipe trained without the bias shows
that the network, the data and the budget can learn the classes. The old line (the benchmark's own ERM on its
unbiased test set) removed exactly those settings, and was decided on the very test set the comparisons use;
it remains only for a family that builds no bias-free variant (BFFHQ and BAR, released as they are), said so.
"""

from __future__ import annotations

from typing import Any

from debias_workbench.core.statistics import run_value
from debias_workbench.pipeline.datasets import get_family
from debias_workbench.report.helpers import capability_line

from .reference import reference_grid_of


def reference_values(rows: list[dict[str, Any]], grid: str | None, variant: str, test_set: str) -> list[float]:
    """The reference runs' accuracy on `test_set` (per seed, in seed order): reference grid `grid`'s runs
    trained on `variant`."""
    own = [
        r
        for r in rows
        if r.get("kind") == "eval"
        and r.get("grid") == grid
        and r.get("train_variant") == variant
        and r.get("variant") == test_set
        and r.get("metric") == "accuracy"
    ]
    return [run_value(r) for r in sorted(own, key=lambda r: r["seed"])]


def bias_free_line(
    config: dict[str, Any], bench: Any, rows: list[dict[str, Any]], task: str
) -> tuple[bool, str] | None:
    """(capable, sentence) of benchmark `bench` (`tables.Benchmark`) from its bias-free reference; None where its
    family declares none for its train variant (the caller keeps the benchmark's own ERM line, said so)."""
    ds_cfg = config["datasets"][bench.dataset]
    ref = get_family(bench.family).bias_free_reference(ds_cfg, bench.train_variant)
    if ref is None:
        return None
    values = reference_values(rows, reference_grid_of(config, bench.grid), ref.variant, ref.test_set)
    model = f"ERM trained on {ref.variant} (the bias balanced away)"
    ok, line = capability_line(model, f"on {ref.split}", values, bench.chance, task)
    return ok, f"{bench.dataset} {bench.train_variant}: {line}"
