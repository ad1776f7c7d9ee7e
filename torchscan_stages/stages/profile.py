"""Stage ``profile``: an instrumented torch.profiler pass (operators by self time)."""

from __future__ import annotations

from ..pipeline.runner import WORKLOAD_KEYS, StageContext, record_execution, stage_main

KEYS = (*WORKLOAD_KEYS, "profile")


def run(ctx: StageContext) -> None:
    from ..measure.profile import profile_workload
    from ..pipeline.quiet import without_kineto_lines
    from ..pipeline.workload import build_workload, thread_settings

    workload = build_workload(ctx.config)
    with thread_settings(ctx.config.threads), without_kineto_lines():
        report = profile_workload(
            workload,
            device=workload.device,
            row_limit=ctx.config.profile.row_limit,
            name=workload.name,
        )
    record_execution(report, workload.precision)
    # No flat metrics: profiler self times are instrumented, not numbers to track.
    ctx.write_report(report)


if __name__ == "__main__":
    stage_main("profile", KEYS, run)
