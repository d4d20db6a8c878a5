"""Every method on every benchmark (issue 53), a table across the four papers: for each benchmark (a
grid of the config with `report: matrix`, at each of its train variants, by each number its family
declares, `DatasetFamily.benchmark_metrics`), each method's difference from ERM with its 95 % interval and
verdict (`core.statistics.difference`), a cell that cannot run shown with the reason
(`training.applicability`), and one heatmap.

Its report section is declared in `report.py` (`PAPER`), the grid report kind it fills in `workflow.py`;
this package module imports neither, so the workflow reads the one without the other."""
