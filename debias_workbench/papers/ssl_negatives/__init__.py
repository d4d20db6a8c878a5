"""Non-semantic negatives for MoCo-v2 and BYOL (Ge et al., NeurIPS 2021): Table 1 with its
similarities and alpha curve, on the main evaluation dataset and on the datasets its runs are
scored on (ImageNet-100).

Its report sections are declared in `report.py` (`PAPER`), what it asks of the config layer (if
anything) in `workflow.py`; this package module imports neither, so the workflow reads the one without
the other."""
