"""``python -m torchscan_stages summary``: the cost table of an embedded model + its JSON."""

from __future__ import annotations

import argparse
import sys

from ..analysis.summary import summary
from ..report import save_report
from ..zoo import small_resnet, tiny_transformer


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m torchscan_stages summary",
        description="Print the module cost table of an embedded, locally initialised model and "
        "write its AnalysisReport as JSON (atomically).",
    )
    parser.add_argument("--model", choices=("cnn", "transformer"), default="cnn")
    parser.add_argument("--json", default="reports/summary.json", help="report path")
    parser.add_argument("--max-depth", type=int, default=None)
    parser.add_argument("--mode", choices=("full", "structure"), default="full")
    return parser


def main(argv: list[str]) -> int:
    options = _parser().parse_args(argv)
    if options.max_depth is not None and options.max_depth < 0:
        print("--max-depth must be >= 0", file=sys.stderr)
        return 2
    if options.model == "cnn":
        report = summary(
            small_resnet(), (3, 32, 32), mode=options.mode, max_depth=options.max_depth
        )
    else:
        import torch

        tokens = torch.zeros(1, 32, dtype=torch.long)
        report = summary(
            tiny_transformer(), args=(tokens,), mode=options.mode, max_depth=options.max_depth
        )
    path = save_report(report, options.json)
    print(f"report written to {path}")
    return 0
