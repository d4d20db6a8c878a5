"""Errors that name the offending file and the fix.

`SkipItem` is raised for one bad input item: the stage records it in the manifest of
skipped items and goes on. `PipelineError` stops the whole run (bad config, missing model).
"""


class PipelineError(RuntimeError):
    """A problem the user must fix before the stage can run; the message says how."""


class SkipItem(Exception):
    """One input item cannot be used; `reason` goes into the skipped-items manifest."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class StoreError(PipelineError):
    """A store that does not hold what its fingerprint says (or has none); the message names the
    store and the command that rebuilds it."""
