"""Command line the workflow's training, evaluation and analysis rules call (the report has its own:
`python -m report`).

  python -m training train --config JOB.json --train-store P --runs-dir D [--aligned-stores F=P ...] [--test-stores T=P ...]
  python -m training evaluate --config EVAL.json --models M ... --stores T=P ... --out F ...
  python -m training evaluate-imagenet --config EVAL.json --stores V=P ... --out F
  python -m training analyse --config A.json --analysis consistency|fivecrop|saliency|texture --models M ... --stores V=P ... --out F [--arrays F.npz]

`--config` is the job's config slice (`workbench.slices`), a JSON file the workflow writes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from core.atomic import NoRoomError, atomic_path
from core.errors import StoreError
from core.phases import phase, summary
from pipeline.fingerprint import check_store

from .models import WeightsError


def _stores(pairs: list[str]) -> dict[str, Path]:
    """NAME=STORE pairs, each store passing its cheap fingerprint check before any work starts."""
    stores = {k: Path(v) for k, v in (p.split("=", 1) for p in pairs)}
    with phase("store_checks"):
        for store in stores.values():
            check_store(store)
    return stores


def _write_rows(path: Path, rows: list[dict]) -> None:
    with phase("saving"), atomic_path(path) as tmp:
        tmp.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))


def _analyse(args: argparse.Namespace, config: dict) -> None:
    with phase("imports"):
        from . import analysis

    stores = _stores(args.stores)
    with phase("scoring"):
        if args.analysis == "texture":
            from .texture_eval import texture_rows

            rows = texture_rows(args.models, config, stores)
        elif args.analysis == "saliency":
            rows, arrays = analysis.saliency_outputs(args.models, config, stores)
            with atomic_path(args.arrays) as tmp:
                with open(tmp, "wb") as fh:
                    np.savez_compressed(fh, **arrays)
        else:
            rows = getattr(analysis, f"{args.analysis}_rows")(args.models, config, stores)
    _write_rows(args.out, rows)


def _evaluate(parser: argparse.ArgumentParser, args: argparse.Namespace, config: dict) -> None:
    """Every model scored on its test sets (and on the official images where given), each loaded once;
    each store checked once for all of them."""
    with phase("imports"):
        from .build import pick_device
        from .evaluation import load_trained, score_run

    plans = [(config, _stores(args.stores), args.out, "--out")]
    if args.official_config:
        plans.append((json.loads(args.official_config.read_text()), _stores(args.official_stores), args.official_out,
                      "--official-out"))
    for _cfg, _sets, outs, flag in plans:
        if len(outs) != len(args.models):
            parser.error(f"--models gives {len(args.models)} models, {flag} {len(outs)} files")
    device = pick_device()
    for i, model in enumerate(args.models):
        with phase("setup"):
            method, state = load_trained(model, device)
        for cfg, stores, outs, _flag in plans:
            with phase("scoring"):
                rows = score_run(method, state, cfg, stores, device)
            _write_rows(outs[i], rows)


def main(argv: list[str] | None = None) -> int:
    imports = time.process_time()  # the interpreter, torch and this package (core.phases)
    parser = argparse.ArgumentParser(prog="python -m training")
    sub = parser.add_subparsers(dest="cmd", required=True)
    tr = sub.add_parser("train", help="the runs of one job (a pack), one after the other")
    tr.add_argument("--train-store", type=Path, required=True)
    tr.add_argument("--runs-dir", type=Path, required=True, help="each run writes <runs-dir>/<experiment>/seed<seed>/")
    tr.add_argument("--aligned-stores", nargs="*", default=[], help="FIELD=STORE pairs (e.g. CLAD's backgrounds)")
    tr.add_argument("--test-stores", nargs="*", default=[], help="TEST_SET=STORE pairs the runs' monitors score")
    ev = sub.add_parser("evaluate", help="score trained runs on their test sets")
    ev.add_argument("--models", type=Path, nargs="+", required=True)
    ev.add_argument("--out", type=Path, nargs="+", required=True, help="one eval.jsonl per model, in order")
    ev.add_argument("--stores", nargs="+", required=True, help="TEST_SET=STORE pairs")
    ev.add_argument("--official-config", type=Path, help="scoring slice of the official Background Challenge images")
    ev.add_argument("--official-stores", nargs="*", default=[], help="VARIANT=STORE pairs of the official images")
    ev.add_argument("--official-out", type=Path, nargs="*", default=[], help="one eval_official.jsonl per model")
    evi = sub.add_parser("evaluate-imagenet")
    an = sub.add_parser("analyse")
    an.add_argument("--analysis", choices=["consistency", "fivecrop", "saliency", "texture"], required=True)
    an.add_argument("--models", type=Path, nargs="+", required=True)
    an.add_argument("--arrays", type=Path, help="saliency: .npz of the maps for the figure")
    for p in (evi, an):
        p.add_argument("--stores", nargs="+", required=True, help="VARIANT=STORE pairs")
        p.add_argument("--out", type=Path, required=True)
    for p in (tr, ev, evi, an):
        p.add_argument("--config", type=Path, required=True, help="the job's config slice (JSON)")
    args = parser.parse_args(argv)
    config = json.loads(args.config.read_text())
    try:
        if args.cmd == "train":
            with phase("imports"):
                from .runs import train_runs

            with phase("store_checks"):
                check_store(args.train_store)
            train_runs(config, args.train_store, _stores(args.aligned_stores), _stores(args.test_stores), args.runs_dir)
        elif args.cmd == "evaluate":
            _evaluate(parser, args, config)
        elif args.cmd == "evaluate-imagenet":
            with phase("imports"):
                from .evaluation import evaluate_imagenet_model

            stores = _stores(args.stores)
            with phase("scoring"):
                rows = evaluate_imagenet_model(config, stores)
            _write_rows(args.out, rows)
        else:
            _analyse(args, config)
    except (WeightsError, StoreError, NoRoomError) as exc:  # a message naming the file and the fix, no traceback
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(summary(imports), flush=True)  # for benchmarks/demo_rules.py
    return 0


if __name__ == "__main__":
    sys.exit(main())
