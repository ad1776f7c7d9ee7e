"""Stage ``flops``: operator FLOPs of one workload call (measure_flops)."""

from __future__ import annotations

import sys

from ..pipeline.runner import WORKLOAD_KEYS, StageContext, complete_value, stage_main

KEYS = (*WORKLOAD_KEYS, "flops")


def run(ctx: StageContext) -> None:
    from ..analysis.operators import measure_flops
    from ..pipeline.workload import build_workload, thread_settings
    from ..report import IncompleteAnalysisError

    workload = build_workload(ctx.config)
    with thread_settings(ctx.config.threads):
        try:
            report = measure_flops(workload, strict=ctx.config.flops.strict, name=workload.name)
        except IncompleteAnalysisError as error:
            print(f"flops: flops.strict = true and {error}", file=sys.stderr)
            raise SystemExit(1) from None
    ctx.write_report(report)
    ctx.write_metrics(
        {
            "total_flops": complete_value(report.total),
            "product_flops": complete_value(report.product_flops),
        }
    )


if __name__ == "__main__":
    stage_main("flops", KEYS, run)
