"""Stage ``latency``: first-call and warmed latency with declared-work throughput."""

from __future__ import annotations

from typing import Any

from ..pipeline.runner import (
    WORKLOAD_KEYS,
    StageContext,
    budget_outcome,
    complete_value,
    record_execution,
    stage_main,
)

KEYS = (*WORKLOAD_KEYS, "latency", "budgets")


def run(ctx: StageContext) -> None:
    from ..measure.latency import measure_latency
    from ..pipeline.workload import build_workload, thread_settings

    cfg = ctx.config
    workload = build_workload(cfg)
    with thread_settings(cfg.threads):
        report = measure_latency(
            workload,
            work_units=workload.work_units,
            unit=workload.unit,
            warmup=cfg.latency.warmup,
            min_run_time=cfg.latency.min_run_time,
            max_run_time=cfg.latency.max_run_time,
            device=workload.device,
            name=workload.name,
        )
    record_execution(report, workload.precision)
    section = report.latency
    metrics: dict[str, Any] = {}
    if section is not None:
        metrics["first_call_s"] = complete_value(section.first_call)
        metrics["warmed_median_s"] = complete_value(section.warmed)
        metrics["throughput_per_s"] = complete_value(section.throughput)
        if section.stats is not None and section.warmed.status == "complete":
            metrics["warmed_iqr_s"] = section.stats.iqr
        report.diagnostics.extend(
            budget_outcome(metrics, "warmed_median_s", section.warmed, cfg.budgets.latency_median_s)
        )
    ctx.write_report(report)
    ctx.write_metrics(metrics)


if __name__ == "__main__":
    stage_main("latency", KEYS, run)
