"""Texture synthesis through an external command line, many images per call.

Ge et al. (2021, Sec. 2.2) made ImageNet-Texture with EmbarkStudios' `texture-synthesis` binary
(`--out-size 224 generate A.png B.png`, one texture per call). The default tool here is G'MIC's
patch-based `syntexturize_matchpatch` (pip package `gmic`, CeCILL-2.1) through
`python -m debias_workbench.pipeline.gmic_synth`, which takes a whole batch per call; `embark` runs the binary the
config points at, once per image.

Failures are contained per image: a missing tool is a `PipelineError` naming the fix; a call
that exits non-zero or runs past its time limit is retried image by image, and an image whose
own call still fails, or whose output is missing, unreadable or of the wrong size, comes back
as a skip reason naming the image. If every image of a batch fails the tool is broken, and that
is an error too (rather than a dataset of skipped items).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from debias_workbench.core.errors import PipelineError


@dataclass(frozen=True)
class TextureJob:
    id: str
    a: np.ndarray  # (p, p, 3) uint8 example patches
    b: np.ndarray
    seed: int
    size: int  # side of the texture to synthesize


@dataclass(frozen=True)
class Tool:
    """`argv`: the command; batch tools get one JOBS.json argument, per-image tools get Embark's arguments."""

    name: str
    argv: tuple[str, ...]
    batch: bool
    patch_size: int = 7

    def commands(self, jobs: list[dict[str, Any]], spec_path: Path) -> list[list[str]]:
        if self.batch:
            spec_path.write_text(json.dumps({"patch_size": self.patch_size, "jobs": jobs}))
            return [[*self.argv, str(spec_path)]]
        return [
            [
                *self.argv,
                "--rand-seed",
                str(j["seed"]),
                "--out-size",
                f"{j['size']}x{j['size']}",
                "--out",
                j["out"],
                "generate",
                j["a"],
                j["b"],
            ]
            for j in jobs
        ]


def make_tool(cfg: dict[str, Any]) -> Tool:
    """The tool `cfg` (`tool`, `binary`, `gmic_patch_size`) names."""
    if cfg["tool"] == "gmic":
        return Tool(
            "gmic", (sys.executable, "-m", "debias_workbench.pipeline.gmic_synth"), True, int(cfg["gmic_patch_size"])
        )
    if cfg["tool"] == "embark":
        if not cfg.get("binary"):
            raise PipelineError(
                "texture.tool is embark but texture.binary is not set: point it at EmbarkStudios' "
                "texture-synthesis executable"
            )
        return Tool("embark", (str(Path(cfg["binary"]).expanduser()),), False)
    raise PipelineError(f"unknown texture.tool {cfg['tool']!r}; use gmic or embark")


def synthesize(jobs: list[TextureJob], tool: Tool, timeout_s: float) -> list[np.ndarray | str]:
    """One (size, size, 3) uint8 texture per job, or a string saying why there is none."""
    if not jobs:
        return []
    with tempfile.TemporaryDirectory(prefix="texture-") as tmp:
        files: list[dict[str, Any]] = []
        for k, job in enumerate(jobs):
            a, b, out = (Path(tmp) / f"{k:05d}_{part}.png" for part in ("a", "b", "out"))
            Image.fromarray(job.a).save(a)
            Image.fromarray(job.b).save(b)
            files.append(
                {
                    "a": str(a),
                    "b": str(b),
                    "out": str(out),
                    "seed": job.seed,
                    "size": job.size,
                    "patch": int(job.a.shape[0]),
                }
            )
        if tool.batch:
            failure = _run(tool, files, Path(tmp) / "jobs.json", timeout_s * len(jobs))
            results = [_read(f["out"], job.size) for f, job in zip(files, jobs)]
            if failure is not None:
                # isolate the image(s) that broke the batch; the others keep their outputs
                for k, (f, job) in enumerate(zip(files, jobs)):
                    if isinstance(results[k], str):
                        Path(f["out"]).unlink(missing_ok=True)
                        results[k] = _run_one(tool, f, Path(tmp) / f"job{k:05d}.json", timeout_s, job.size)
        else:
            results = [_run_one(tool, f, Path(tmp) / "job.json", timeout_s, job.size) for f, job in zip(files, jobs)]
    textures = [
        r if isinstance(r, np.ndarray) else f"texture synthesis ({tool.name}) failed for {job.id}: {r}"
        for r, job in zip(results, jobs)
    ]
    if all(isinstance(r, str) for r in textures):
        raise PipelineError(
            f"the texture tool {tool.name} failed on every image of a batch of {len(jobs)}; "
            f"first: {textures[0]}. Check that it runs (texture.tool / texture.binary)"
        )
    return textures


def _run_one(tool: Tool, job: dict[str, Any], spec_path: Path, timeout_s: float, size: int) -> np.ndarray | str:
    failure = _run(tool, [job], spec_path, timeout_s)
    return _read(job["out"], size) if failure is None else failure


def _run(tool: Tool, jobs: list[dict[str, Any]], spec_path: Path, timeout_s: float) -> str | None:
    """Run the tool on `jobs`; None when every call exited 0, else what went wrong."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}  # one thread: identical textures whatever the machine
    for argv in tool.commands(jobs, spec_path):
        try:
            proc = subprocess.Popen(
                argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True
            )
        except OSError as exc:
            raise PipelineError(
                f"cannot start the texture tool {argv[0]!r} ({exc.strerror}); install it "
                "(`pip install gmic` for the default) or fix texture.binary"
            ) from exc
        try:
            _, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the whole process group: no orphaned workers
            proc.communicate()
            return f"timed out after {timeout_s:.0f} s (texture.timeout_s per image)"
        if proc.returncode != 0:
            tail = err.decode(errors="replace").strip().splitlines()[-3:]
            return f"exit status {proc.returncode}: {' | '.join(tail) or 'no message'}"
    return None


def _read(path: str, size: int) -> np.ndarray | str:
    if not Path(path).exists():
        return "the tool wrote no output"
    try:
        with Image.open(path) as im:
            image = np.asarray(im.convert("RGB"), dtype=np.uint8)
    except (OSError, SyntaxError, ValueError) as exc:
        return f"unreadable output ({type(exc).__name__})"
    if image.shape[:2] != (size, size):
        return f"output is {image.shape[1]}x{image.shape[0]}, expected {size}x{size}"
    return image
