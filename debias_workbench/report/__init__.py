"""The report layer: tables and figures rebuilt from the runs' tidy metric rows (JSON lines),
the dataset manifests and stores. `workbench report` builds it; `report.sections.sections()` lists
its sections in order: the generic ones here and the registered papers' (`debias_workbench.papers`),
which this layer reads through the papers' registry and never names. It imports `core`, the dataset
families' declarations (`pipeline.datasets`) and the methods' (`training.methods.spec`), never a model."""
