"""Stage ``crawl``: module-level cost of one forward call (crawl_module)."""

from __future__ import annotations

from typing import Any

from ..pipeline.runner import WORKLOAD_KEYS, StageContext, complete_value, stage_main

KEYS = (*WORKLOAD_KEYS, "crawl")
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
    from ..pipeline.workload import build_workload, thread_settings

    workload = build_workload(ctx.config)
    # The forward runs inside the workload's precision region (autocast) like every stage.
    with thread_settings(ctx.config.threads), workload.precision_context():
        report = crawl_module(
            workload.eager_model, args=workload.inputs, mode=ctx.config.crawl.mode
        )
    metrics: dict[str, Any] = {key: complete_value(getattr(report.totals, key)) for key in TOTALS}
    ctx.write_report(report)
    ctx.write_metrics(metrics)


if __name__ == "__main__":
    stage_main("crawl", KEYS, run)
