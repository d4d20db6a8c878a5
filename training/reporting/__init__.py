"""Aggregation of the runs' tidy metrics into the report's tables and figures."""
