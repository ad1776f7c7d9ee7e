"""Stage ``compare``: the configured candidate against its baseline.

Writes ``reports/compare.json`` (BenchmarkComparison from compare_benchmarks, with the
owner's output check) and ``reports/compare_diff.json`` (ReportDiff of the two models'
crawl reports). The tolerance is the owner's (``candidate.tolerance``, no default). A
candidate that cannot run here (e.g. torch.compile without a working compiler) is recorded
as a ``candidate_failed`` diagnostic with no numbers, never as a crash or a fabricated delta.
All of it is one library call: :func:`pipeline.candidate.compare_configured_candidate`.
"""

from __future__ import annotations

from ..pipeline.runner import WORKLOAD_KEYS, StageContext, stage_main

KEYS = (*WORKLOAD_KEYS, "compare", "candidate")


def run(ctx: StageContext) -> None:
    from ..pipeline.candidate import compare_configured_candidate

    result = compare_configured_candidate(ctx.config)
    comparison = result.comparison
    ctx.headline = [f"check {'passed' if comparison.check.passed else 'not passed'}"] + [
        f"{d.metric} ratio {d.ratio:.3g} ({d.verdict})" for d in comparison.deltas if d.ratio
    ]
    ctx.write_report(comparison)
    ctx.write_report(result.diff, "compare_diff")
    ctx.write_metrics(result.metrics())


if __name__ == "__main__":
    stage_main("compare", KEYS, run, required=("candidate",), about=__doc__ or "")
