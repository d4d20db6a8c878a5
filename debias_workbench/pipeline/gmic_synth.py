"""The default texture-synthesis command line: `python -m debias_workbench.pipeline.gmic_synth JOBS.json`.

JOBS.json holds {"patch_size": int, "jobs": [{"a", "b", "out", "seed", "size", "patch"}, ...]}. For each job
the two example patches are put side by side (G'MIC's `syntexturize_matchpatch` takes one
exemplar) and a size x size texture is synthesized from them, seeded with `srand`. G'MIC's
automatic number of scales fails on exemplars under 32 px high (seen with 16-px patches): those
use one scale. A job that fails is reported on stderr and left without output, and the exit
status is then 1; the caller retries and records it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    import gmic

    spec = json.loads(Path((argv or sys.argv[1:])[0]).read_text())
    patch = int(spec["patch_size"])
    interpreter = gmic.Gmic()
    status = 0
    for job in spec["jobs"]:
        size = int(job["size"])
        scales = 0 if int(job["patch"]) >= 32 else 1
        command = (
            f"srand {int(job['seed'])} input \"{job['a']}\" input \"{job['b']}\" append x "
            f"syntexturize_matchpatch {size},{size},{scales},{patch} output \"{job['out']}\""
        )
        try:
            interpreter.run(command)
        except gmic.GmicException as exc:
            print(f"{job['out']}: {str(exc).strip().splitlines()[0]}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
