"""`python -m debias_workbench ...` is the `workbench` command (the form the workflow's rules use:
it runs in a job's own environment, where the console script may not be installed)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
