"""The report layer: tables and figures rebuilt from the runs' tidy metric rows (JSON lines),
the dataset manifests and stores. `workbench report` builds it; `report.sections.SECTIONS` is the
registry of its sections, in the order they appear. It imports `core`, the dataset families'
declarations (`pipeline.datasets`) and the methods' (`training.methods.spec`), never a model."""
