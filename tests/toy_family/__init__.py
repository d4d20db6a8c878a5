"""A toy dataset family outside the package: its module and its config section beside it (`stripes.yaml`),
registered by one line in a test (tests/test_toy_family.py), as a user's would be."""
