"""Stage ``latency``: first-call and warmed latency with declared-work throughput.

Measures: one first call, then warmed block averages (median, IQR) and throughput as the
declared work of one call over the median. Writes: reports/latency.json (BenchmarkReport),
metrics/latency.json (complete values only) and plots/latency_blocks.json (each warmed
block's per-call time, DVC plots data).
"""

from __future__ import annotations

import sys

if not __package__:  # run as a file: its relative imports cannot work
    sys.exit(
        "torchscan_stages/stages/latency.py is part of a package; run it as a module: "
        "python -m torchscan_stages.stages.latency"
    )

from typing import Any

from ..pipeline.feedback import figure
from ..pipeline.runner import (
    WORKLOAD_KEYS,
    StageContext,
    budget_outcome,
    complete_value,
    record_execution,
    stage_main,
)

WRITES = (
    "reports/latency.json",
    "metrics/latency.json",
    "metrics/latency.evidence.json",
    "plots/latency_blocks.json",
)
KEYS = (*WORKLOAD_KEYS, "latency", "budgets")


def run(ctx: StageContext) -> None:
    from ..measure.latency import measure_latency
    from ..pipeline.workload import build_workload, thread_settings
    from ..render.caveats import latency_caveats

    cfg = ctx.config
    workload = build_workload(cfg)
    with thread_settings(cfg.threads), ctx.timed():
        report = measure_latency(
            workload,
            work_units=workload.work_units,
            unit=workload.unit,
            options={
                "warmup": cfg.latency.warmup,
                "min_run_time": cfg.latency.min_run_time,
                "max_run_time": cfg.latency.max_run_time,
            },
            device=workload.device,
            name=workload.name,
        )
    record_execution(report, workload.precision, cfg, threads=True)
    section = report.latency
    metrics: dict[str, Any] = {}
    evidence: dict[str, Any] = {}
    if section is not None:
        metrics["first_call_s"] = complete_value(section.first_call)
        metrics["warmed_median_s"] = complete_value(section.warmed)
        metrics["throughput_per_s"] = complete_value(section.throughput)
        if section.stats is not None and section.warmed.status == "complete":
            metrics["warmed_iqr_s"] = section.stats.iqr
        report.diagnostics.extend(
            budget_outcome(metrics, "warmed_median_s", section.warmed, cfg.budgets.latency_median_s)
        )
        evidence = latency_evidence(report, metrics)
        caveats = latency_caveats(report)  # on the same line as the number they qualify
        ctx.headline = [
            figure("warmed median", section.warmed, caveats),
            figure("first call", section.first_call),
            figure("throughput", section.throughput, caveats),
        ]
    ctx.write_report(report)
    ctx.write_metrics(metrics, evidence=evidence)
    # Raw warmed block averages (seconds per call); none at all when nothing was timed.
    times = section.block_times_s if section is not None else []
    ctx.write_plot([{"block": i, "time_s": t} for i, t in enumerate(times, 1)], "latency_blocks")


def latency_evidence(report: Any, metrics: dict[str, Any]) -> dict[str, Any]:
    """Per metrics key, the status and validity warnings of its value: the warmed figures
    (median, IQR, throughput, the budget check on the median) carry the timing's warnings
    (one block, the backstop, a loaded host, noise); the first call is one sample."""
    from ..pipeline.evidence import evidence_of, warning_codes

    section = report.latency
    codes = warning_codes(report.diagnostics, ("latency",))
    warmed = evidence_of(section.warmed, codes)
    found = {
        "first_call_s": evidence_of(section.first_call),
        "warmed_median_s": warmed,
        "throughput_per_s": evidence_of(section.throughput, codes),
        "warmed_median_s_within_budget": warmed,
    }
    if "warmed_iqr_s" in metrics:
        found["warmed_iqr_s"] = warmed
    return found


if __name__ == "__main__":
    stage_main("latency", KEYS, run, about=__doc__ or "", writes=WRITES)
