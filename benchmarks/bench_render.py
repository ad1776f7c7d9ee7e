"""Time render_report on a 5,000-layer AnalysisReport; the budget is < 2 s and < 5 MB.

Run: ``.venv/bin/python benchmarks/bench_render.py [--layers N] [--repeat R]``. The report is
a real ``crawl_module`` report of a deep model built in code (blocks of Linear, ReLU and a
custom leaf without a handler, so partial values and diagnostics are rendered too). The crawl
runs once, untimed; the script prints the best and median wall time of ``repeat`` renders
after one warm-up render (template compilation), and the page size.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch import nn

from torchscan_stages.analysis.crawl import crawl_module
from torchscan_stages.render import render_report
from torchscan_stages.report import AnalysisReport


class Mystery(nn.Module):
    """A leaf that computes without a handler: its metrics are unavailable (diagnosed)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 0.5


def deep_model(layers: int) -> nn.Module:
    """About ``layers`` module calls: a root plus blocks of four records each."""
    blocks = max(1, (layers - 1) // 4)
    return nn.Sequential(
        *[nn.Sequential(nn.Linear(16, 16), nn.ReLU(), Mystery()) for _ in range(blocks)]
    )


def crawled_report(layers: int) -> AnalysisReport:
    return crawl_module(deep_model(layers), (16,))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    report = crawled_report(args.layers)
    html = render_report(report)  # warm-up: template compilation
    times = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        html = render_report(report)
        times.append(time.perf_counter() - start)
    size = len(html.encode("utf-8"))
    print(
        f"render_report: {len(report.layers):,} layers, {len(report.diagnostics):,} diagnostics: "
        f"best {min(times):.3f} s, median {statistics.median(times):.3f} s over {args.repeat}; "
        f"page {size:,} bytes ({size / 1e6:.2f} MB); budget < 2 s and < 5 MB: "
        f"{'ok' if max(times) < 2 and size < 5_000_000 else 'OVER BUDGET'}"
    )


if __name__ == "__main__":
    main()
