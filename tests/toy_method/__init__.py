"""A toy method outside the package: its module and its declaration beside it (`smoothing.yaml`), registered by
one line in a test (tests/test_toy_method.py), as a user's would be."""
