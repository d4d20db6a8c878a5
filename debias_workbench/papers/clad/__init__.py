"""CLAD (Wang et al., BMVC 2022) on the Background Challenge: Tables 2-6, Figs. 5-6 and the sweeps,
and its supplementary's texture part (Tables 7-9, the shape bias); the roles of the models they
compare, which the texture and self-supervised tables share.

Its report sections are declared in `report.py` (`PAPER`), what it asks of the config layer (if
anything) in `workflow.py`; this package module imports neither, so the workflow reads the one without
the other."""
