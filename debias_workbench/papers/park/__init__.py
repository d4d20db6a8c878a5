"""Bias amplification (Park, Chung & Choo, CVPR 2024): LfF, BiasEnsemble and the paper's method over
Colored MNIST, Waterbirds, BFFHQ and BAR; Tables 1-3 and Fig. 2 of the grids it reports.

Its report sections are declared in `report.py` (`PAPER`), what it asks of the config layer (if
anything) in `workflow.py`; this package module imports neither, so the workflow reads the one without
the other."""
