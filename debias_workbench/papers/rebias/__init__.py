"""ReBias (Bahng et al., ICML 2020): the Biased MNIST grids' Table 1, verdict and Figs. 3-4, and the
texture / image Table 2.

Its report sections are declared in `report.py` (`PAPER`), what it asks of the config layer (if
anything) in `workflow.py`; this package module imports neither, so the workflow reads the one without
the other."""
