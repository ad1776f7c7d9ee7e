"""Stage ``rss``: peak resident set size of a fresh child that rebuilds the same workload."""

from __future__ import annotations

import json
import sys
from typing import Any

from ..pipeline.runner import (
    WORKLOAD_KEYS,
    StageContext,
    budget_outcome,
    complete_value,
    record_execution,
    stage_main,
)

KEYS = (*WORKLOAD_KEYS, "rss", "budgets")


def child_command(ctx: StageContext) -> list[str]:
    """The child's command line: the validated config travels as JSON, nothing is re-read."""
    config = ctx.config.model_dump(mode="json", by_alias=True)
    return [
        sys.executable,
        "-m",
        "torchscan_stages.pipeline.rss_child",
        json.dumps(config, sort_keys=True, separators=(",", ":")),
    ]


def run(ctx: StageContext) -> None:
    from ..measure.rss import measure_peak_rss
    from ..pipeline.workload import resolve_device

    resolve_device(ctx.config.device)  # an absent device fails here, before the child runs
    name = f"{ctx.config.model.name}-{ctx.config.input.name}-{ctx.config.precision.name}"
    report = measure_peak_rss(child_command(ctx), timeout=ctx.config.rss.timeout, name=name)
    record_execution(report, ctx.config.precision)
    metrics: dict[str, Any] = {}
    section = report.rss
    if section is not None:
        metrics["peak_rss_bytes"] = complete_value(section.peak)
        for phase in section.phases:
            metrics[f"phase_{phase.name}_peak_rss_bytes"] = complete_value(phase.peak_rss)
        report.diagnostics.extend(
            budget_outcome(
                metrics, "peak_rss_bytes", section.peak, ctx.config.budgets.peak_rss_bytes
            )
        )
    ctx.write_report(report)
    ctx.write_metrics(metrics)


if __name__ == "__main__":
    stage_main("rss", KEYS, run)
