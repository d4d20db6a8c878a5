"""A toy method with a prerequisite artifact of its own, outside the package: its module, its declaration
and its kind, registered by one line each in a test (tests/test_prerequisites.py), as a user's would be."""
