"""Models, debiasing methods, the trainer, evaluation and the report."""
