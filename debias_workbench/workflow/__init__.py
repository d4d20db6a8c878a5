"""The workflow layer: config validation and expansion, each job's config slice (its identity)
and its cluster resources. It sits above `pipeline/` (dataset generation) and `training/`
(models, methods, evaluation), which never import it."""
