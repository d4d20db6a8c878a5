"""A toy fifth paper (tests/test_paper_units.py): its `PAPER` in `report.py`, its quoted number in
`numbers.yaml`."""
