"""Stage ``flops``: operator FLOPs of one workload call (measure_flops).

Measures: FLOPs counted over torch's dispatch (all work and its tensor-product share),
listing every uncounted operator. Writes: reports/flops.json (FlopReport) and
metrics/flops.json (complete totals only).
"""

from __future__ import annotations

import sys

if not __package__:  # run as a file: its relative imports cannot work
    sys.exit(
        "torchscan_stages/stages/flops.py is part of a package; run it as a module: "
        "python -m torchscan_stages.stages.flops"
    )


from ..pipeline.feedback import figure
from ..pipeline.runner import COUNT_KEYS, StageContext, complete_value, stage_main

KEYS = (*COUNT_KEYS, "flops")  # not threads: counts do not depend on it
WRITES = ("reports/flops.json", "metrics/flops.json", "metrics/flops.evidence.json")


def run(ctx: StageContext) -> None:
    from ..analysis.operators import measure_flops
    from ..pipeline.workload import build_workload
    from ..report import IncompleteAnalysisError

    workload = build_workload(ctx.config)
    try:  # at torch's own thread count: the FLOPs do not depend on ``threads``
        report = measure_flops(workload, strict=ctx.config.flops.strict, name=workload.name)
    except IncompleteAnalysisError as error:
        print(f"flops: flops.strict = true and {error}", file=sys.stderr)
        raise SystemExit(1) from None
    ctx.headline = [
        figure("total FLOPs", report.total),
        figure("product FLOPs", report.product_flops),
    ]
    from ..pipeline.evidence import evidence_of

    ctx.write_report(report)
    ctx.write_metrics(
        {
            "total_flops": complete_value(report.total),
            "product_flops": complete_value(report.product_flops),
        },
        evidence={
            "total_flops": evidence_of(report.total),
            "product_flops": evidence_of(report.product_flops),
        },
    )


if __name__ == "__main__":
    stage_main("flops", KEYS, run, about=__doc__ or "", writes=WRITES)
