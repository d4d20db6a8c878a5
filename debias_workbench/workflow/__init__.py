"""The workflow layer: config validation and expansion, each job's config slice (its identity)
and its cluster resources. It sits above `debias_workbench/pipeline/` (dataset generation) and
`debias_workbench/training/` (models, methods, evaluation), which never import it."""
