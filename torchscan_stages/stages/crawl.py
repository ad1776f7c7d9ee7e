"""Stage ``crawl``: module-level cost of one forward call (crawl_module).

Measures: per-module formula FLOPs, MACs, DMAs, parameters and buffers, plus operator FLOPs
of the same call (a different method, never added to the module formulas).
Writes: reports/crawl.json (AnalysisReport), metrics/crawl.json (complete totals only),
plots/layer_flops.json (per-layer module FLOPs of complete leaf layers, DVC plots data).
"""

from __future__ import annotations

import sys

if not __package__:  # run as a file: its relative imports cannot work
    sys.exit(
        "torchscan_stages/stages/crawl.py is part of a package; run it as a module: "
        "python -m torchscan_stages.stages.crawl"
    )

from typing import Any

from ..pipeline.feedback import figure
from ..pipeline.runner import COUNT_KEYS, StageContext, complete_value, stage_main

KEYS = (*COUNT_KEYS, "crawl")  # not threads: counts do not depend on it
WRITES = (
    "reports/crawl.json",
    "metrics/crawl.json",
    "metrics/crawl.evidence.json",
    "plots/layer_flops.json",
)
TOTALS = (
    "parameters",
    "parameter_bytes",
    "buffer_bytes",
    "module_flops",
    "macs",
    "dmas",
    "operator_flops",
)


def run(ctx: StageContext) -> None:
    from ..analysis.crawl import crawl_module
    from ..pipeline.workload import build_workload

    workload = build_workload(ctx.config)
    # The forward runs inside the workload's precision region (autocast) like every stage;
    # at torch's own thread count: what it counts does not depend on ``threads``.
    with workload.precision_context():
        report = crawl_module(
            workload.eager_model,
            args=workload.inputs,
            kwargs=workload.kwargs,
            mode=ctx.config.crawl.mode,
            fill_from_operators=ctx.config.crawl.fill_from_operators,
        )
    from ..pipeline.evidence import evidence_of

    metrics: dict[str, Any] = {key: complete_value(getattr(report.totals, key)) for key in TOTALS}
    evidence = {key: evidence_of(getattr(report.totals, key)) for key in TOTALS}
    totals = report.totals
    ctx.headline = [
        figure("module FLOPs", totals.module_flops),
        figure("MACs", totals.macs),
        figure("parameters", totals.parameters),
        figure("operator FLOPs", totals.operator_flops),
    ]
    ctx.write_report(report)
    ctx.write_metrics(metrics, evidence=evidence)
    ctx.write_plot(layer_flops_rows(report), "layer_flops")


def layer_flops_rows(report: Any) -> list[dict[str, Any]]:
    """One row per leaf module call with complete module FLOPs (plots data, never a zero)."""
    rows = []
    for layer in report.layers:
        value = complete_value(layer.metrics.module_flops)
        if layer.is_leaf and value is not None:
            label = layer.path if layer.call_index == 0 else f"{layer.path}#{layer.call_index}"
            rows.append({"layer": label or "(model)", "module_flops": value})
    return rows


if __name__ == "__main__":
    stage_main("crawl", KEYS, run, about=__doc__ or "", writes=WRITES)
