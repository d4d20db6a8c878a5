"""The package type-checks clean (mypy, pyproject's `[tool.mypy]`).

A test rather than a step of the README's command before the tests: a cold check is about 20 CPU-s
(docs/measurements.md), which here runs beside the tests that wait on a scheduler instead of before
every test."""

from __future__ import annotations

import subprocess
import sys

from .conftest import ROOT


def test_the_package_type_checks_clean():
    proc = subprocess.run([sys.executable, "-m", "mypy", "debias_workbench"], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert "Success: no issues found" in proc.stdout
