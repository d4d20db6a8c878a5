"""The generation subcommands of `workbench` (`debias_workbench.cli`): `workbench generate <step> ...`,
which the workflow's generation rules call; `workbench verify STORE ...`, which recomputes
stores' fingerprints (`pipeline.fingerprint`); and `workbench export STORE --format F --out DIR`
(`pipeline.export`).

Each step reads its dataset's job config (`--config`, a JSON file the workflow writes:
`{"dataset", "config", "seed"}`), exactly as the Snakefile validated it, so the code never
re-reads or re-interprets the workflow's config files.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from debias_workbench.core.errors import PipelineError
from debias_workbench.core.phases import summary

from .datasets import get_family


def verify(argv: list[str]) -> int:
    """Exit 0 when every store holds what its fingerprint says, else 1 with the first bad rows named."""
    from .fingerprint import read_fingerprint
    from .fingerprint import verify as verify_store

    parser = argparse.ArgumentParser(prog="workbench verify", description=verify.__doc__)
    parser.add_argument("stores", type=Path, nargs="+")
    bad = 0
    for store in parser.parse_args(argv).stores:
        try:
            problems = verify_store(store)
        except Exception as exc:  # an unreadable store is a finding to report, as a bad chunk is
            problems = [str(exc) if isinstance(exc, PipelineError) else f"unreadable ({type(exc).__name__}: {exc})"]
        if problems:
            bad += 1
            print(f"{store}: BAD", *(f"  {p}" for p in problems), sep="\n")
        else:
            print(f"{store}: ok, fingerprint {read_fingerprint(store)['digest'][:16]}")
    return 1 if bad else 0


def export(argv: list[str]) -> int:
    """Write a variant store in a format other tools read, with a dataset card (`pipeline.export`)."""
    from .export import FORMATS
    from .export import export as export_store

    parser = argparse.ArgumentParser(prog="workbench export", description=export.__doc__)
    parser.add_argument("store", type=Path)
    parser.add_argument("--format", required=True, choices=sorted(FORMATS))
    parser.add_argument("--out", type=Path, required=True, help="a new folder")
    args = parser.parse_args(argv)
    try:
        out = export_store(args.store, args.format, args.out)
    except PipelineError as exc:
        print(f"workbench export: {exc}", file=sys.stderr)
        return 1
    print(f"{args.store} -> {out} ({args.format}; card: {out / 'README.md'})")
    return 0


def generate(argv: list[str]) -> int:
    """One generation step of one dataset (its family's step), as the workflow's rules call it."""
    imports = time.process_time()  # the interpreter and this package (core.phases)
    parser = argparse.ArgumentParser(prog="workbench generate", description=generate.__doc__)
    parser.add_argument("step", help="one of the family's generation steps (`DatasetFamily.steps`)")
    parser.add_argument("--family", required=True)
    parser.add_argument("--config", type=Path, required=True, help="the dataset's job config (JSON)")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--variant")
    parser.add_argument("--shard", type=int, help="a staged step's job, counted among its jobs (`shards.job_blocks`)")
    parser.add_argument("--min-images", type=int, default=1, help="the fewest images of a job of a staged step")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--inputs", type=Path, nargs="*", default=[])
    args = parser.parse_args(argv)
    family = get_family(args.family)
    job = json.loads(args.config.read_text())
    try:
        family.run_step(
            args.step,
            job["config"],
            job["seed"],
            args.out,
            args.inputs,
            args.workers,
            args.variant,
            args.shard,
            args.min_images,
        )
    except PipelineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(summary(imports), flush=True)  # for benchmarks/demo_rules.py: the step is "other"
    return 0
