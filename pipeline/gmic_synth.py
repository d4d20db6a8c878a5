"""The default texture-synthesis command line: `python -m pipeline.gmic_synth JOBS.json`.

JOBS.json holds {"patch_size": int, "jobs": [{"a", "b", "out", "seed", "size"}, ...]}. For each job
the two example patches are put side by side (G'MIC's `syntexturize_matchpatch` takes one
exemplar) and a size x size texture is synthesized from them, seeded with `srand`. A job that
fails is reported on stderr and left without output; the caller records it.
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
    for job in spec["jobs"]:
        size = int(job["size"])
        command = (f"srand {int(job['seed'])} input \"{job['a']}\" input \"{job['b']}\" append x "
                   f"syntexturize_matchpatch {size},{size},0,{patch} output \"{job['out']}\"")
        try:
            interpreter.run(command)
        except gmic.GmicException as exc:
            print(f"{job['out']}: {exc}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
