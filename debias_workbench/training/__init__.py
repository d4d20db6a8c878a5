"""Models, debiasing methods, the trainer, evaluation and the analyses of trained models."""
