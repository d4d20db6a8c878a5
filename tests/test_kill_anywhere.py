"""Kill anywhere: a slice of the tiny workflow (IN-9 generation with per-shard segmentation,
AdaIN stylization, G'MIC texture synthesis in subprocesses, one training run and its scoring)
is SIGKILLed as a whole process group at seeded moments in every stage, rerun with
`--rerun-incomplete` after each kill, and must end with exactly what an uninterrupted run made:
the same store fingerprints, the same weights, the same scores; no partial output taken as
complete, and no finished job redone for any reason but an incomplete or updated input."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch
import yaml

from debias_workbench.pipeline.fingerprint import FILE, verify

from .conftest import ROOT, checkout_view, workdir
from .test_generation import store_digest
from .test_workflow import planned, snakemake

#: (stage, the output an attempt asks for, log glob whose (re)appearance marks that the stage runs), in
#: dependency order: each attempt asks only for its stage's output, on one core, so the stage is still to do
#: when its attempt starts (the previous attempt was killed before it) and no other stage runs beside it
MOMENTS = [
    ("synthetic source", "sources/in9_synthetic", "in9_synthetic_source.log"),
    ("segmentation shard", "intermediate/in9/shards/00000.npz", "in9_segment_00000.log"),
    ("segmentation gather", "intermediate/in9/segmented.zarr", "in9_segment.log"),
    ("variant store", "datasets/in9/original.zarr", "in9_variant_original.log"),
    ("AdaIN stylization shard", "intermediate/in9/stylized_shards/00000.npz", "in9_stylized_00000.log"),
    ("texture synthesis shard (G'MIC subprocesses)", "intermediate/in9/texture_shards/00000.npz",
     "in9_texture_00000.log"),
    ("stylized gather", "datasets/in9/stylized.zarr", "in9_variant_stylized.log"),
    ("training", "runs/base_in9/seed0/model.pt", "train_base_in9_seed0.log"),
    ("evaluation", "runs/base_in9/seed0/eval.jsonl", "evaluate_base_in9.log"),
]
#: why Snakemake may (re)run a job after a kill; anything else (params, code, software) is a
#: finished job redone without cause
ALLOWED_REASONS = ("Missing output files", "Incomplete output files", "Input files updated by another job",
                   "Updated input files")
#: Snakemake's reason for a job whose output is in place but recorded as incomplete, under
#: `--rerun-incomplete` (it adds such outputs to the forced files): a kill that came after the job's
#: atomic rename but before Snakemake heard the job end. Allowed only for such jobs (`interrupted_in_place`)
FORCED = "Forced execution"
#: a job as Snakemake prints it when it starts: rule, output(s), jobid; and the line when it ends
JOB_START = re.compile(r"^(?:local)?(?:rule|checkpoint) (\w+):\n(?:    .*\n)*?    output: (.+)\n(?:    .*\n)*?    jobid: (\d+)$", re.M)
JOB_END = re.compile(r"^Finished jobid: (\d+)", re.M)
STORES = ("original", "stylized", "texture")


def slice_args(root: Path) -> tuple[list[str], Path]:
    """The Snakemake options of the slice under `root` (without targets or cores; they end in `--config`,
    so targets go before them), and its results folder."""
    results = root / "results"
    return ["--configfile", "tests/data/tiny.yaml", "--config", f"results={results}"], results


def slice_targets(results: Path) -> list[str]:
    return [f"{results}/datasets/in9/stylized.zarr", f"{results}/datasets/in9/texture.zarr",
            f"{results}/runs/base_in9/seed0/eval.jsonl"]


def started_since(logs: Path, pattern: str, since: float) -> bool:
    return any(p.stat().st_mtime >= since for p in logs.glob(pattern))


def interrupted_in_place(attempt: str) -> set[str]:
    """The outputs of the jobs an attempt's log shows started and not finished (the kill came
    while they ran) that are on disk: each was written atomically, so the job had finished its
    work, but Snakemake, killed before it heard so, keeps its output marked incomplete."""
    ended = set(JOB_END.findall(attempt))
    return {path.strip() for _, outputs, jobid in JOB_START.findall(attempt) if jobid not in ended
            for path in outputs.split(",") if Path(path.strip()).exists()}


def assert_redone_with_cause(text: str, in_place: set[str]) -> None:
    """Every job the log shows (re)run has a cause a kill explains: an output missing or an input
    remade, or, for `FORCED`, an output in `in_place` (left complete but unrecorded by a kill)."""
    blocks = re.split(r"\n(?=\[\w{3} \w{3} )", text)   # one job start per block, after its time stamp
    for block in blocks:
        reasons = re.findall(r"^\s+reason: (.+)$", block, re.M)
        if not reasons:
            continue
        assert len(reasons) == 1 and len(JOB_START.findall(block)) == 1, block  # no reason goes unchecked
        job = JOB_START.search(block)
        for part in reasons[0].split(";"):
            cause = part.split(":")[0].strip()
            if cause == FORCED:
                assert job and {o.strip() for o in job.group(2).split(",")} <= in_place, (block, sorted(in_place))
            else:
                assert cause in ALLOWED_REASONS, block


def run_with_kills(args: list[str], results: Path, rng: random.Random, log: Path) -> tuple[list[str], set[str]]:
    """Run the slice stage by stage (MOMENTS), SIGKILL the process group of each attempt a seeded
    delay after its stage's log appears, unlock as the user would, and go on with the next stage's
    attempt (which first finishes what the kill interrupted); the stages killed in, in order, and
    the outputs kills left in place unrecorded (`interrupted_in_place`)."""
    killed, in_place = [], set()
    logs = results / "logs"
    with log.open("a") as out:
        for stage, target, pattern in MOMENTS:
            offset = out.tell()
            start = time.time() - 1  # file times have 1-s granularity on some filesystems
            proc = subprocess.Popen([sys.executable, "-m", "snakemake", f"{results}/{target}", "--rerun-incomplete",
                                     "--cores", "1", *args], cwd=workdir(), stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            while proc.poll() is None and not started_since(logs, pattern, start):
                time.sleep(0.05)
            if proc.poll() is None:
                time.sleep(rng.uniform(0.0, 0.8))
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                killed.append(stage)
            proc.wait()
            if killed[-1:] == [stage]:  # a killed Snakemake leaves its lock: the user's `--unlock`, then the rerun
                out.flush()
                in_place |= interrupted_in_place(log.read_bytes()[offset:].decode())
                subprocess.run([sys.executable, "-m", "snakemake", "--unlock", *args], cwd=workdir(), stdout=out,
                               stderr=subprocess.STDOUT, check=True)
            out.write(f"\n=== killed during {stage} ===\n" if killed[-1:] == [stage] else f"\n=== {stage}: done\n")
            out.flush()
    return killed, in_place


def test_a_slice_killed_in_every_stage_ends_as_an_uninterrupted_run(tmp_path):
    reference_args, reference = slice_args(tmp_path / "reference")
    args, results = slice_args(tmp_path / "killed")
    log = tmp_path / "killed.log"
    # the uninterrupted run goes beside the killed ones, which mostly start Snakemake and wait; in a folder of
    # its own, as the user's `--unlock` after each kill removes every lock of its folder
    with (tmp_path / "reference.log").open("w") as reference_log:
        uninterrupted = subprocess.Popen([sys.executable, "-m", "snakemake", *slice_targets(reference), "--cores", "2",
                                          *reference_args], cwd=checkout_view(tmp_path / "reference-checkout"),
                                         stdout=reference_log, stderr=subprocess.STDOUT)
        try:
            killed, in_place = run_with_kills(args, results, random.Random("kill-anywhere"), log)
            reference_rc = uninterrupted.wait(timeout=900)
        finally:
            if uninterrupted.poll() is None:
                uninterrupted.kill()
    assert reference_rc == 0, (tmp_path / "reference.log").read_text()[-3000:]
    print(f"killed in {len(killed)} of {len(MOMENTS)} stages: {killed}; outputs left in place unrecorded: "
          f"{sorted(in_place)}")
    # every stage but possibly the shortest (a job may finish between the log's appearance and the kill) was hit
    assert len(killed) >= len(MOMENTS) - 2, (killed, log.read_text()[-3000:])

    final = snakemake(*slice_targets(results), "--rerun-incomplete", "--cores", "2", *args)
    assert_redone_with_cause(log.read_text() + final, in_place)
    assert planned(snakemake(*slice_targets(results), "-n", "--cores", "2", *args)) == {}, \
        "a finished slice plans more work"

    for store in STORES:
        path = results / "datasets" / "in9" / f"{store}.zarr"
        assert verify(path) == [], store
        assert store_digest(path) == store_digest(reference / "datasets" / "in9" / f"{store}.zarr"), store
        assert json.loads((path / FILE).read_text())["digest"] == store_digest(path)
    run, ref_run = results / "runs" / "base_in9" / "seed0", reference / "runs" / "base_in9" / "seed0"
    weights = torch.load(run / "model.pt", weights_only=False)["state_dict"]
    ref_weights = torch.load(ref_run / "model.pt", weights_only=False)["state_dict"]
    assert weights.keys() == ref_weights.keys()
    assert all(torch.equal(weights[k], ref_weights[k]) for k in weights)
    assert (run / "eval.jsonl").read_text() == (ref_run / "eval.jsonl").read_text()
    # what a kill leaves behind is only ever a `*.tmp-<pid>` sibling, never a final name
    for path in results.rglob("*.tmp-*"):
        assert re.search(r"\.tmp-\d+$", path.name), path


def test_a_full_disk_fails_naming_the_store_and_leaves_none_that_looks_complete(tmp_path):
    """A store write that runs out of room (here the process's file-size limit, RLIMIT_FSIZE, as a
    full disk would: the write fails with EFBIG instead of ENOSPC) stops the job with a message
    naming the store and the fix, no traceback, and leaves neither the store nor its temporary copy."""
    from .standins import make_mnist_idx

    source = make_mnist_idx(tmp_path / "mnist", 30, 5)
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["datasets"]["biased_mnist"]
    cfg["source"] = {"kind": "idx", **source}
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"dataset": "biased_mnist", "config": cfg, "seed": 0}))
    out = tmp_path / "out" / "rho_0.5.zarr"
    # a file-size limit above the store's metadata files and below its image chunks (tens of kB: binarised
    # digits compress well)
    limited = ("import resource, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
               "resource.setrlimit(resource.RLIMIT_FSIZE, (10_000, 10_000)); from debias_workbench.cli import main; "
               "sys.exit(main(sys.argv[1:]))")
    proc = subprocess.run([sys.executable, "-c", limited, "generate", "variant", "--family", "biased_mnist", "--config", str(job),
                           "--variant", "rho_0.5", "--out", str(out)], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and f"no room to write {out}" in proc.stderr, proc.stderr[-2000:]
    assert not out.exists() and not list(out.parent.glob("*.tmp-*"))
    # with room again, the same command builds it
    subprocess.run([sys.executable, "-m", "debias_workbench", "generate", "variant", "--family", "biased_mnist", "--config", str(job),
                    "--variant", "rho_0.5", "--out", str(out)], cwd=ROOT, check=True)
    assert verify(out) == []
