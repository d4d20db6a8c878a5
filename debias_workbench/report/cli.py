"""`workbench report` (`debias_workbench.cli`; the workflow's `report` rule calls it):

  workbench report --config REPORT.json --metrics F ... --segmentation-quality F --manifests F ...
                   --stores VARIANT=STORE ... --out-dir D [--saliency-arrays F.npz]

`--config` is the report's config slice (`workflow.report_slice.report_config`), a JSON file the
workflow writes; the metric files are the runs' tidy JSON-lines rows.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .build import build_report
from .context import ReportInputs


def main(argv: list[str]) -> int:
    """Build report.md, report.html, metrics.csv and the figures from the runs' tidy rows."""
    parser = argparse.ArgumentParser(prog="workbench report", description=main.__doc__)
    parser.add_argument("--config", type=Path, required=True, help="the report's config slice (JSON)")
    parser.add_argument("--metrics", type=Path, nargs="+", required=True, help="tidy JSON-lines metric files")
    parser.add_argument("--segmentation-quality", type=Path, required=True)
    parser.add_argument("--manifests", type=Path, nargs="+", required=True)
    parser.add_argument("--stores", nargs="+", required=True, help="VARIANT=STORE pairs of the evaluation dataset")
    parser.add_argument("--saliency-arrays", type=Path, help="the saliency analysis' .npz (Fig. 6)")
    parser.add_argument("--out-dir", type=Path, required=True)
    args = parser.parse_args(argv)
    stores = {k: Path(v) for k, v in (p.split("=", 1) for p in args.stores)}
    inputs = ReportInputs(
        json.loads(args.config.read_text()),
        args.metrics,
        args.segmentation_quality,
        args.manifests,
        stores,
        args.saliency_arrays,
    )
    build_report(inputs, args.out_dir)
    return 0
