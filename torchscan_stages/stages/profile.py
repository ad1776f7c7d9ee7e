"""Stage ``profile``: an instrumented torch.profiler pass (operators by self time).

Measures: operator self and total times under the profiler (instrumented, not clean
latency). Writes: reports/profile.json (BenchmarkReport); no flat metrics.
"""

from __future__ import annotations

import sys

if not __package__:  # run as a file: its relative imports cannot work
    sys.exit(
        "torchscan_stages/stages/profile.py is part of a package; run it as a module: "
        "python -m torchscan_stages.stages.profile"
    )

from ..pipeline.runner import (
    WORKLOAD_KEYS,
    StageContext,
    record_execution,
    stage_main,
)

WRITES = ("reports/profile.json",)
KEYS = (*WORKLOAD_KEYS, "profile")


def run(ctx: StageContext) -> None:
    from ..measure.profile import profile_workload
    from ..pipeline.quiet import without_kineto_lines
    from ..pipeline.workload import build_workload, thread_settings

    workload = build_workload(ctx.config)
    with thread_settings(ctx.config.threads), without_kineto_lines(), ctx.timed():
        report = profile_workload(
            workload,
            device=workload.device,
            row_limit=ctx.config.profile.row_limit,
            name=workload.name,
        )
    record_execution(report, workload.precision, ctx.config, threads=True)
    # No flat metrics: profiler self times are instrumented, not numbers to track.
    section = report.profile
    if section is not None:
        total = section.operators_total if section.operators_total is not None else "?"
        ctx.headline = [
            f"{len(section.operators)} of {total} operators by self time "
            "(instrumented, not clean latency)"
        ]
    ctx.write_report(report)


if __name__ == "__main__":
    stage_main("profile", KEYS, run, about=__doc__ or "", writes=WRITES)
