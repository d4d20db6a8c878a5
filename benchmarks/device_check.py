"""The project's device check: what the workbench promises on a GPU, in one command of at most 8 minutes.

    python -m benchmarks.device_check [--device cuda|cpu] [--budget 470] [--out DIR] [--commit SHA]
                                      [--methods erm,clad,...] [--write-step-times PATH]

Stages, each in its own process and under what is left of the time budget (a stage that would get
under 20 s is skipped and says so):

1. the machine: card, compute capability, native bfloat16, torch / CUDA / cuDNN versions;
2. the CUDA tests, `pytest -m cuda` (tests/test_cuda.py: one step of every method at its paper's
   shapes and precision, no host sync in a step, resume equality, two processes on one GPU, GPU
   scoring against the CPU's, files that load without a GPU);
3. `benchmarks.gpu_throughput` at 224 px: every method at its paper's setting beside the plain
   torchvision loop, the loader holding the split in memory, every row in one process (on a GPU;
   a fresh process per row cost about 40 s of start each), with each method's GPU-busy share;
4. the same for ERM and CLAD (on the CPU path ERM) with the loader streaming (`--stream`), as runs
   larger than `training.loader.in_memory_max_gb` read.

It ends with one Markdown block ready for docs/measurements.md (date, card, commit, command, the
throughput table, the goals, the tests' summary), printed and written to `<out>/device_check.md`
beside every stage's log. `--device cpu` runs the same stages at tiny shapes (32 px, batch 8, one
step: every path runs, the CUDA tests are collected and skipped); the test suite runs that path.

On the lent GPU machine (Python 3.12, its own torch, no network; docs/cluster.md) put the checkout on
PYTHONPATH with the carried zarr / jsonschema wheels installed to a target folder, and give
`--commit` (the copy there has no git history). `--write-step-times PATH` also writes the in-memory
throughput rows as the cost model's step times (`debias_workbench/workflow/step_times.yaml`: card,
commit, date; `write_step_times`).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .gpu_throughput import busy_text
from .loader import ROOT

#: the issue's limit for the whole check on one GPU, with room left for the machine's start
DEFAULT_BUDGET_S = 470
#: a stage is not started with less time than this left
MIN_STAGE_S = 20
#: (stage, its cap in seconds) on a GPU; on the CPU every cap is the same (tiny shapes)
STAGE_CAPS = {"cuda tests": 100, "throughput": 300, "streaming": 60}
#: the CPU path's shapes: a check that every path runs, its rows in one process as on a GPU
TINY = ["--size", "32", "--batch", "8", "--steps", "1", "--warmup", "0", "--workers", "1", "--one-process"]
#: on a GPU every row in the stage's one process, 20 timed steps: the whole table inside the stage's cap
GPU_ROWS = ["--one-process", "--steps", "20"]
#: the streaming stage's rows: on a GPU ERM and CLAD (the method that streams three stores), on the CPU ERM
STREAMING_METHODS = {"cuda": "erm,clad", "cpu": "erm"}


def machine(device: str) -> dict[str, Any]:
    """The card and software the figures were measured with."""
    import torch

    info: dict[str, Any] = {"python": sys.version.split()[0], "torch": torch.__version__,
                            "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version()}
    if device == "cuda" and torch.cuda.is_available():
        capability = torch.cuda.get_device_capability(0)
        info.update(card=torch.cuda.get_device_name(0), capability=f"{capability[0]}.{capability[1]}",
                    native_bf16=capability >= (8, 0), gpus=torch.cuda.device_count(),
                    memory_gib=round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1))
    else:
        info.update(card="CPU", cpu_threads=torch.get_num_threads())
    return info


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown (give --commit)"


def run_stage(name: str, argv: list[str], limit: float, log: Path) -> dict[str, Any]:
    """Run `argv` (from the project's root) for at most `limit` seconds, its output to `log`:
    {name, rc (None when skipped or timed out), seconds, note}."""
    if limit < MIN_STAGE_S:
        return {"name": name, "rc": None, "seconds": 0.0, "note": f"skipped: {limit:.0f} s of the budget left"}
    t0 = time.perf_counter()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with open(log, "w") as out:
        out.write(f"$ {' '.join(argv)}\n")
        out.flush()
        # its own process group: a stage that runs out of time takes its spawned rows, DataLoader workers
        # and test processes with it, so they cannot slow the next stage
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            rc = proc.wait(timeout=limit)
            note = "" if rc == 0 else f"exit {rc}"
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            rc, note = None, f"timed out after {limit:.0f} s"
    return {"name": name, "rc": rc, "seconds": round(time.perf_counter() - t0, 1), "note": note}


def test_summary(log: Path) -> str:
    """pytest's last summary line ("3 passed, 1 skipped in 4.2s"), or what the log ends with."""
    lines = log.read_text().splitlines() if log.exists() else []
    found = [line.strip("= ") for line in lines if re.search(r"\b(passed|failed|skipped|error)\b.* in [\d.]+s", line)]
    return found[-1] if found else (lines[-1] if lines else "no output")


def markdown_table(results: dict[str, dict[str, Any]], networks: dict[str, str]) -> list[str]:
    """The throughput rows as a Markdown table (cost: ERM's images/s over the row's)."""
    erm = results.get("erm", {}).get("images_per_s")
    out = ["| method | network | batch | images/s | step ms | data wait | GPU busy | peak MiB | cost vs ERM | loader |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for name, r in results.items():
        cost = f"{erm / r['images_per_s']:.2f}x" if erm else "n/a"
        out.append(f"| {name} | {networks.get(name, '?')} | {r['batch']} | {r['images_per_s']:.1f} | "
                   f"{r['step_ms']:.0f} | {100 * r['wait_share']:.1f} % | {busy_text(r)} | {r['peak_mib']:.0f} | "
                   f"{cost} | {r['loader']} |")
    return out


def report(info: dict[str, Any], commit: str, command: str, stages: list[dict[str, Any]],
           throughput: dict[str, Any] | None, streaming: dict[str, Any] | None, tests: str) -> str:
    """The Markdown block for docs/measurements.md."""
    date = datetime.date.today().isoformat()
    card = info["card"] + (f" (compute capability {info['capability']}, {info['memory_gib']} GiB)"
                           if "capability" in info else "")
    lines = [f"### Device check, {date}: {card}, commit {commit}", "",
             f"`{command}`; Python {info['python']}, torch {info['torch']}, CUDA {info['cuda']}, "
             f"cuDNN {info['cudnn']}.",
             "", f"- CUDA tests (`pytest -m cuda`): {tests}"]
    for result, title in ((throughput, "in memory"), (streaming, "streaming")):
        if not result:
            continue
        lines += ["", f"Throughput at {result['size']} px, loader {title} (`benchmarks/gpu_throughput.py`):", ""]
        lines += markdown_table(result["results"], result["networks"])
        if result["failures"]:
            lines += ["", "Failed rows: " + "; ".join(f"{k}: {v}" for k, v in result["failures"].items())]
        if title == "in memory":
            lines += ["", "Goals:"] + [f"- {goal}" for goal in result["goals"]]
    lines += ["", "Stages: " + "; ".join(f"{s['name']} {s['seconds']:.0f} s" + (f" ({s['note']})" if s["note"] else "")
                                        for s in stages)]
    return "\n".join(lines) + "\n"


#: throughput rows that are no workbench method at its setting: the plain loops, ERM without deterministic kernels
NOT_STEP_TIMES = ("erm_benchmark", "plain", "plain_amp")
#: earlier runs of the check whose step rows the step-time file keeps beside the newest (`write_step_times`)
KEPT_RUNS = 4


def write_step_times(path: Path, throughput: dict[str, Any], card: str, commit: str, command: str) -> None:
    """The cost model's step-time file (`workflow/cost.py` reads it) from the in-memory throughput rows
    `throughput` (gpu_throughput's --json): per method its networks, batch, image side and step ms. The
    rows of the file it replaces, where measured on the same card at the same side, move to its `other_runs`
    (the last `KEPT_RUNS`), so that the plan shows how far the rows move between runs of the check."""
    import yaml  # the throughput stage's dependency too

    rows = {name: {"networks": throughput["networks"][name].split(" + "), "batch": r["batch"],
                   "image_size": throughput["size"], "step_ms": round(r["step_ms"], 1)}
            for name, r in throughput["results"].items() if name not in NOT_STEP_TIMES}
    data = {"card": card, "commit": commit, "date": datetime.date.today().isoformat(), "command": command,
            "setting": f"{throughput['size']} px, bf16 autocast where the card has it, deterministic kernels, "
                       "loader in memory, one GPU", "rows": rows}
    old = yaml.safe_load(path.read_text()) if path.exists() else None
    sides = {r["image_size"] for r in (old or {}).get("rows", {}).values()}
    if old and old.get("card") == card and sides == {throughput["size"]}:
        last = {"commit": old["commit"], "date": old["date"],
                "step_ms": {name: r["step_ms"] for name, r in old["rows"].items()}}
        data["other_runs"] = [last, *old.get("other_runs", [])][:KEPT_RUNS]
    path.write_text("# GPU step times of the training methods, written by benchmarks/device_check.py "
                    "--write-step-times:\n# the cost model's measured rows (debias_workbench/workflow/cost.py)\n"
                    + yaml.safe_dump(data, sort_keys=False, default_flow_style=None))


def _read(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text()) if path.exists() else None


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S, help="seconds for the whole check")
    ap.add_argument("--out", type=Path, default=Path("device-check"), help="folder for the logs and the Markdown")
    ap.add_argument("--commit", help="the commit checked (default: git's HEAD here)")
    ap.add_argument("--methods", help="the throughput rows (default: every method and the plain loop)")
    ap.add_argument("--write-step-times", type=Path, metavar="PATH",
                    help="also write the in-memory rows as the cost model's step times (workflow/step_times.yaml)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    t0 = time.perf_counter()
    left = lambda cap: min(cap, args.budget - (time.perf_counter() - t0))  # noqa: E731
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out.resolve()
    info = machine(args.device)
    print(json.dumps(info), flush=True)
    python = sys.executable
    shapes = GPU_ROWS if args.device == "cuda" else [*TINY, "--photos", str(out / "no-photos")]
    methods = ["--methods", args.methods] if args.methods else []
    # -n 0: the CUDA tests in this one process (pyproject's addopts would start two workers on the one GPU)
    stages = [
        run_stage("cuda tests", [python, "-m", "pytest", "-m", "cuda", "-q", "-p", "no:cacheprovider", "-n", "0",
                                 "tests/test_cuda.py"], left(STAGE_CAPS["cuda tests"]), out / "10-cuda-tests.log"),
        run_stage("throughput", [python, "-m", "benchmarks.gpu_throughput", "--device", args.device, *shapes, *methods,
                                 "--json", str(out / "throughput.json")], left(STAGE_CAPS["throughput"]),
                  out / "20-throughput.log"),
        run_stage("streaming", [python, "-m", "benchmarks.gpu_throughput", "--device", args.device, *shapes, "--stream",
                                "--methods", STREAMING_METHODS[args.device], "--json", str(out / "streaming.json")],
                  left(STAGE_CAPS["streaming"]), out / "30-streaming.log"),
    ]
    for stage in stages:
        print(f"{stage['name']}: {stage['seconds']:.0f} s {stage['note']}", flush=True)
    command = "python -m benchmarks.device_check " + " ".join(argv if argv is not None else sys.argv[1:])
    text = report(info, args.commit or git_commit(), command.strip(), stages, _read(out / "throughput.json"),
                  _read(out / "streaming.json"), test_summary(out / "10-cuda-tests.log"))
    (out / "device_check.md").write_text(text)
    if args.write_step_times and (throughput := _read(out / "throughput.json")):
        write_step_times(args.write_step_times, throughput, info["card"], args.commit or git_commit(), command.strip())
    print(text, flush=True)
    return 0 if all(s["rc"] == 0 for s in stages) else 1


if __name__ == "__main__":
    sys.exit(main())
