"""The training subcommands of `workbench` (`debias_workbench.cli`), which the workflow's training,
scoring and analysis rules call (the report has its own: `workbench report`):

  workbench train --config JOB.json --train-store P --runs-dir D [--aligned-stores F=P ...] [--test-stores T=P ...]
                  [--prerequisites D]
  workbench prerequisite --kind K --config PREREQUISITE.json --train-store P --out F
  workbench evaluate --config EVAL.json --models M ... --stores T=P ... --out F ...
  workbench evaluate-imagenet --config EVAL.json --stores V=P ... --out F
  workbench analyse --config A.json --analysis consistency|fivecrop|saliency|texture --models M ... --stores V=P ...
                    --out F [--arrays F.npz]

`--config` is the job's config slice (`workflow.slices`), a JSON file the workflow writes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from debias_workbench.core.atomic import NoRoomError, atomic_path
from debias_workbench.core.errors import StoreError
from debias_workbench.core.names import RUNS_PER_GPU_VARIABLE
from debias_workbench.core.phases import phase, summary
from debias_workbench.core.registry import import_entry
from debias_workbench.pipeline.fingerprint import check_store

from .job_time import CONTINUE_EXIT_CODE, ContinueInNextJob, install_stop_signals, job_budget
from .methods import PREREQUISITES
from .run_config import EvaluationConfig, TrainJobConfig
from .run_files import release_checkpoint
from .weights import WeightsError


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


def _tracker_argument(parser: argparse.ArgumentParser) -> None:
    from debias_workbench.core.names import TRACKERS_VARIABLE

    from .trackers import parse_trackers

    parser.add_argument(
        "--trackers",
        type=parse_trackers,
        default=os.environ.get(TRACKERS_VARIABLE, ""),
        help=f"training.trackers, joined by commas (default: ${TRACKERS_VARIABLE}, which the "
        "workflow sets: the rules' commands do not name them, so turning trackers on reruns nothing)",
    )


def _track(trackers: list[str], run_dir: Path, rows: list[dict]) -> None:
    """A scored run's rows to its trackers (`training.trackers`), beside its training curves."""
    if trackers:
        from .trackers import Trackers

        watch = Trackers(trackers, run_dir, {}, fresh=False)
        watch.log(rows)
        watch.close()


def _parser(prog: str, description: str | None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"workbench {prog}", description=description)
    parser.add_argument("--config", type=Path, required=True, help="the job's config slice (JSON)")
    return parser


def _job(run: Callable[[argparse.Namespace, Any], None], parser: argparse.ArgumentParser, argv: list[str]) -> int:
    """Parse `argv`, run the job on its config slice (its JSON, typed by each `run`); a user's error is one line
    naming the file and the fix (exit 2), a run continuing in the next job exits `CONTINUE_EXIT_CODE`, and the job's
    phases end its log (for benchmarks/demo_rules.py)."""
    imports = time.process_time()  # the interpreter, torch and this package (core.phases)
    args = parser.parse_args(argv)
    try:
        run(args, json.loads(args.config.read_text()))
    except (WeightsError, StoreError, NoRoomError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ContinueInNextJob:  # the trainer said where it stopped; the workflow's retry continues the run
        print(summary(imports), flush=True)
        return CONTINUE_EXIT_CODE
    print(summary(imports), flush=True)
    return 0


def train(argv: list[str]) -> int:
    """The runs of one job (a pack), one after the other, or several at once on a GPU (training.runs_per_gpu)."""
    parser = _parser("train", train.__doc__)
    parser.add_argument("--train-store", type=Path, required=True)
    parser.add_argument(
        "--runs-dir", type=Path, required=True, help="each run writes <runs-dir>/<experiment>/seed<seed>/"
    )
    parser.add_argument("--aligned-stores", nargs="*", default=[], help="FIELD=STORE pairs (e.g. CLAD's backgrounds)")
    parser.add_argument("--test-stores", nargs="*", default=[], help="TEST_SET=STORE pairs the runs' monitors score")
    parser.add_argument(
        "--prerequisites",
        type=Path,
        help="the results folder holding the prerequisites' files, <folder>/prerequisites/<kind>/<digest>.pt "
        "(default: the folder above --runs-dir, where the workflow's prerequisite jobs write them)",
    )
    _tracker_argument(parser)
    parser.add_argument(
        "--runs-per-gpu",
        type=int,
        default=int(os.environ.get(RUNS_PER_GPU_VARIABLE, "1")),
        help=f"training.runs_per_gpu: runs trained at once on this job's GPU (default: "
        f"${RUNS_PER_GPU_VARIABLE}, which the workflow sets; no rule's command names it)",
    )

    def run(args: argparse.Namespace, config: TrainJobConfig) -> None:
        install_stop_signals()  # the scheduler's warning and SIGTERM: checkpoint at the next step, continue
        budget = job_budget()  # first: the job's clock runs while torch is imported
        with phase("imports"):
            import torch

            from .runs import train_runs

        with phase("store_checks"):
            check_store(args.train_store)
        # several runs per GPU only on one CUDA process: on the CPU the workflow runs jobs side by side already
        one_process = os.environ.get("WORLD_SIZE", "1") == "1"  # torchrun's processes of a `training.gpus` > 1 run
        at_once = args.runs_per_gpu if torch.cuda.is_available() and one_process else 1
        train_runs(
            config,
            args.train_store,
            _stores(args.aligned_stores),
            _stores(args.test_stores),
            args.runs_dir,
            args.trackers,
            budget,
            at_once,
            args.prerequisites or args.runs_dir.parent,
        )

    return _job(run, parser, argv)


def prerequisite(argv: list[str]) -> int:
    """One prerequisite artifact of a method (`training.prerequisite_kind`), shared by the runs that need it,
    built by its kind's builder and written to its file."""
    parser = _parser("prerequisite", prerequisite.__doc__)
    parser.add_argument("--kind", required=True, choices=sorted(PREREQUISITES), help="its kind")
    parser.add_argument("--train-store", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True, help="its file (<kind>/<digest>.pt)")

    def run(args: argparse.Namespace, config: dict) -> None:
        with phase("imports"):
            build = import_entry(PREREQUISITES[args.kind].builder)
        with phase("store_checks"):
            check_store(args.train_store)
        with phase("setup"):
            build(config, args.train_store, args.out)

    return _job(run, parser, argv)


def evaluate(argv: list[str]) -> int:
    """Every model scored on its test sets (and on the official images where given), each loaded once;
    each store checked once for all of them."""
    parser = _parser("evaluate", evaluate.__doc__)
    parser.add_argument("--models", type=Path, nargs="+", required=True)
    parser.add_argument("--out", type=Path, nargs="+", required=True, help="one eval.jsonl per model, in order")
    parser.add_argument("--stores", nargs="+", required=True, help="TEST_SET=STORE pairs")
    parser.add_argument(
        "--official-config", type=Path, help="scoring slice of the official Background Challenge images"
    )
    parser.add_argument("--official-stores", nargs="*", default=[], help="VARIANT=STORE pairs of the official images")
    parser.add_argument("--official-out", type=Path, nargs="*", default=[], help="one eval_official.jsonl per model")
    _tracker_argument(parser)

    def run(args: argparse.Namespace, config: EvaluationConfig) -> None:
        with phase("imports"):
            from .build import pick_device
            from .evaluation import load_trained, score_run

        plans = [(config, _stores(args.stores), args.out, "--out")]
        if args.official_config:
            plans.append(
                (
                    json.loads(args.official_config.read_text()),
                    _stores(args.official_stores),
                    args.official_out,
                    "--official-out",
                )
            )
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
                _track(args.trackers, model.parent, rows)
            # this job runs once the workflow has accepted the model: its training checkpoint is no longer needed
            release_checkpoint(model.parent)

    return _job(run, parser, argv)


def evaluate_imagenet(argv: list[str]) -> int:
    """An ImageNet model scored on the evaluation variants (the ImageNet-trained rows of the tables)."""
    parser = _parser("evaluate-imagenet", evaluate_imagenet.__doc__)
    parser.add_argument("--stores", nargs="+", required=True, help="VARIANT=STORE pairs")
    parser.add_argument("--out", type=Path, required=True)

    def run(args: argparse.Namespace, config: EvaluationConfig) -> None:
        with phase("imports"):
            from .evaluation import evaluate_imagenet_model

        stores = _stores(args.stores)
        with phase("scoring"):
            rows = evaluate_imagenet_model(config, stores)
        _write_rows(args.out, rows)

    return _job(run, parser, argv)


def _texture(models: list[Path], config: dict, stores: dict[str, Path], _arrays: Path | None) -> list[dict]:
    from .texture_eval import texture_rows

    return texture_rows(models, config, stores)


def _saliency(models: list[Path], config: dict, stores: dict[str, Path], arrays: Path | None) -> list[dict]:
    from .analysis import saliency_outputs

    if arrays is None:
        raise SystemExit("workbench analyse: the saliency analysis writes its maps to --arrays F.npz; give one")
    rows, maps = saliency_outputs(models, config, stores)
    with atomic_path(arrays) as tmp, open(tmp, "wb") as fh:
        np.savez_compressed(fh, **maps)  # type: ignore[arg-type]  # numpy's stub types **arrays as allow_pickle
    return rows


def _consistency(models: list[Path], config: dict, stores: dict[str, Path], _arrays: Path | None) -> list[dict]:
    from .analysis import consistency_rows

    return consistency_rows(models, config, stores)


def _fivecrop(models: list[Path], config: dict, stores: dict[str, Path], _arrays: Path | None) -> list[dict]:
    from .analysis import fivecrop_rows

    return fivecrop_rows(models, config, stores)


#: analysis name -> its rows (the saliency analysis also writes its maps to --arrays)
ANALYSES = {"consistency": _consistency, "fivecrop": _fivecrop, "saliency": _saliency, "texture": _texture}


def analyse(argv: list[str]) -> int:
    """One analysis of trained runs (`ANALYSES`), written as tidy rows."""
    parser = _parser("analyse", analyse.__doc__)
    parser.add_argument("--analysis", choices=sorted(ANALYSES), required=True)
    parser.add_argument("--models", type=Path, nargs="+", required=True)
    parser.add_argument("--arrays", type=Path, help="saliency: .npz of the maps for the figure")
    parser.add_argument("--stores", nargs="+", required=True, help="VARIANT=STORE pairs")
    parser.add_argument("--out", type=Path, required=True)

    def run(args: argparse.Namespace, config: dict) -> None:
        with phase("imports"):  # here, so the job's phases count their import time as "imports"
            from . import analysis, texture_eval  # noqa: F401
        stores = _stores(args.stores)
        with phase("scoring"):
            rows = ANALYSES[args.analysis](args.models, config, stores, args.arrays)
        _write_rows(args.out, rows)

    return _job(run, parser, argv)
