"""Command line the workflow's training, evaluation and report rules call.

  python -m training train --config RUN.json --train-store P --run-dir D [--aligned-stores F=P ...]
  python -m training train-grid --config JOB.json --train-store P --stores NAME=P ... --runs-dir D
  python -m training evaluate --config EVAL.json --model M --stores V=P ... --out F
  python -m training evaluate-imagenet --config EVAL.json --stores V=P ... --out F
  python -m training analyse --config A.json --analysis consistency|fivecrop|saliency|texture --models M ... --stores V=P ... --out F [--arrays F.npz]
  python -m training report --config REPORT.json --metrics F ... --out-dir D ...

`--config` is the job's config slice (`workbench.slices`), a JSON file the workflow writes.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from core.atomic import atomic_path

from .models import WeightsError


def _stores(pairs: list[str]) -> dict[str, Path]:
    return {k: Path(v) for k, v in (p.split("=", 1) for p in pairs)}


def _write_rows(path: Path, rows: list[dict]) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))


def _analyse(args: argparse.Namespace, config: dict) -> None:
    from . import analysis

    stores = _stores(args.stores)
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m training")
    sub = parser.add_subparsers(dest="cmd", required=True)
    tr = sub.add_parser("train")
    tr.add_argument("--train-store", type=Path, required=True)
    tr.add_argument("--run-dir", type=Path, required=True)
    tr.add_argument("--aligned-stores", nargs="*", default=[], help="FIELD=STORE pairs (e.g. CLAD's backgrounds)")
    tg = sub.add_parser("train-grid", help="every method of a grid on one train variant and seed")
    tg.add_argument("--train-store", type=Path, required=True)
    tg.add_argument("--stores", nargs="+", required=True, help="TEST_SET=STORE pairs")
    tg.add_argument("--runs-dir", type=Path, required=True)
    ev = sub.add_parser("evaluate")
    ev.add_argument("--model", type=Path, required=True)
    evi = sub.add_parser("evaluate-imagenet")
    an = sub.add_parser("analyse")
    an.add_argument("--analysis", choices=["consistency", "fivecrop", "saliency", "texture"], required=True)
    an.add_argument("--models", type=Path, nargs="+", required=True)
    an.add_argument("--arrays", type=Path, help="saliency: .npz of the maps for the figure")
    for p in (ev, evi, an):
        p.add_argument("--stores", nargs="+", required=True, help="VARIANT=STORE pairs")
        p.add_argument("--out", type=Path, required=True)
    rep = sub.add_parser("report")
    rep.add_argument("--metrics", type=Path, nargs="+", required=True)
    rep.add_argument("--segmentation-quality", type=Path, required=True)
    rep.add_argument("--manifests", type=Path, nargs="+", required=True)
    rep.add_argument("--stores", nargs="+", required=True)
    rep.add_argument("--saliency-arrays", type=Path, help="the saliency analysis' .npz (Fig. 6)")
    rep.add_argument("--out-dir", type=Path, required=True)
    for p in (tr, tg, ev, evi, an, rep):
        p.add_argument("--config", type=Path, required=True, help="the job's config slice (JSON)")
    args = parser.parse_args(argv)
    config = json.loads(args.config.read_text())
    try:
        if args.cmd == "train":
            from .trainer import train

            train(config, args.train_store, args.run_dir, _stores(args.aligned_stores))
        elif args.cmd == "train-grid":
            from .grid_runs import train_grid_runs

            train_grid_runs(config, args.train_store, _stores(args.stores), args.runs_dir)
        elif args.cmd == "evaluate":
            from .evaluation import evaluate_run

            _write_rows(args.out, evaluate_run(args.model, config, _stores(args.stores)))
        elif args.cmd == "evaluate-imagenet":
            from .evaluation import evaluate_imagenet_model

            _write_rows(args.out, evaluate_imagenet_model(config, _stores(args.stores)))
        elif args.cmd == "analyse":
            _analyse(args, config)
        else:
            from .reporting.report import build_report

            build_report(config, args.metrics, args.segmentation_quality, args.manifests, _stores(args.stores),
                         args.out_dir, args.saliency_arrays)
    except WeightsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
