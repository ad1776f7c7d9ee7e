"""Stage ``compare``: the configured candidate against its baseline.

Writes ``reports/compare.json`` (BenchmarkComparison from compare_benchmarks, with the
owner's output check) and ``reports/compare_diff.json`` (ReportDiff of the two models'
crawl reports). The tolerance is the owner's (``candidate.tolerance``, no default). A
candidate that cannot run here (e.g. torch.compile without a working compiler) is recorded
as a ``candidate_failed`` diagnostic with no numbers, never as a crash or a fabricated delta.
"""

from __future__ import annotations

from typing import Any

from ..pipeline.runner import WORKLOAD_KEYS, StageContext, stage_main

KEYS = (*WORKLOAD_KEYS, "compare", "candidate")


def allclose_check(rtol: float, atol: float) -> Any:
    """The owner's output check: every output tensor allclose to the baseline's."""
    import torch

    def tensors(value: Any) -> list[Any]:
        if isinstance(value, torch.Tensor):
            return [value]
        if isinstance(value, (tuple, list)):
            return [t for item in value for t in tensors(item)]
        if isinstance(value, dict):
            return [t for key in sorted(value) for t in tensors(value[key])]
        return []

    def check(base_out: Any, cand_out: Any) -> dict[str, Any]:
        base, cand = tensors(base_out), tensors(cand_out)
        tolerance = {"rtol": rtol, "atol": atol}
        if not base or len(base) != len(cand):
            return {
                "passed": False,
                "tolerance": tolerance,
                "detail": f"output structure differs: {len(base)} vs {len(cand)} tensors",
            }
        worst = 0.0
        passed = True
        for b, c in zip(base, cand, strict=True):
            if b.shape != c.shape:
                return {
                    "passed": False,
                    "tolerance": tolerance,
                    "detail": f"shape {tuple(c.shape)} != baseline {tuple(b.shape)}",
                }
            b32, c32 = b.detach().float().cpu(), c.detach().float().cpu()
            worst = max(worst, float((c32 - b32).abs().max()) if b32.numel() else 0.0)
            passed = passed and bool(torch.allclose(c32, b32, rtol=rtol, atol=atol))
        return {
            "passed": passed,
            "tolerance": tolerance,
            "detail": f"max |candidate - baseline| = {worst:.3g}; "
            f"torch.allclose(rtol={rtol}, atol={atol})",
        }

    return check


def _failed(ctx: StageContext, error: BaseException) -> Any:
    from ..provenance import build_provenance
    from ..report import BenchmarkComparison, CheckResult, Diagnostic

    message = f"candidate {ctx.config.candidate.name!r} failed: {type(error).__name__}: {error}"
    message = " ".join(message.split())[:2000]
    return BenchmarkComparison(
        provenance=build_provenance(),
        baseline_name="baseline",
        candidate_name=ctx.config.candidate.name,
        check=CheckResult(performed=False, passed=None, error=message),
        deltas=[],
        diagnostics=[Diagnostic(code="candidate_failed", severity="error", message=message)],
    )


def run(ctx: StageContext) -> None:
    from ..analysis.crawl import crawl_module
    from ..compare.benchmarks import compare_benchmarks
    from ..compare.reports import compare_reports
    from ..pipeline.workload import build_workload, thread_settings

    cfg = ctx.config
    rtol, atol = cfg.candidate.tolerance.required()
    baseline = build_workload(cfg)
    failures: list[BaseException] = []
    metrics: dict[str, Any] = {}
    with thread_settings(cfg.threads):
        try:
            candidate = build_workload(cfg, candidate=cfg.candidate)
        except Exception as error:  # e.g. torch.compile refusing this model or backend
            failures.append(error)
        if not failures:

            def candidate_call() -> Any:
                try:
                    return candidate()
                except Exception as error:
                    failures.append(error)
                    raise

            try:
                comparison = compare_benchmarks(
                    baseline,
                    candidate_call,
                    check=allclose_check(rtol, atol),
                    work_units=cfg.input.work_units,
                    unit=cfg.input.unit,
                    warmup=cfg.compare.warmup,
                    min_run_time=cfg.compare.min_run_time,
                    max_run_time=cfg.compare.max_run_time,
                    memory=True,
                    device=baseline.device,
                    baseline_name=baseline.name,
                    candidate_name=candidate.name,
                    seed=cfg.seed,
                )
            except Exception:
                if not failures:
                    raise
        if failures:
            comparison = _failed(ctx, failures[0])
        # The model diff never needs the compiled callable: torch.compile does not change
        # the module crawl_module sees, so the diff uses the eager candidate.
        eager = build_workload(cfg, candidate=cfg.candidate.model_copy(update={"compile": None}))
        with baseline.precision_context():
            before = crawl_module(
                baseline.eager_model, args=baseline.inputs, kwargs=baseline.kwargs
            )
        with eager.precision_context():
            after = crawl_module(eager.eager_model, args=eager.inputs, kwargs=eager.kwargs)
        diff = compare_reports(before, after)
    if comparison.check.passed is not None:
        metrics["check_passed"] = int(comparison.check.passed)
    for delta in comparison.deltas:
        if delta.ratio is not None and not delta.withheld:
            metrics[f"{delta.metric.replace('.', '_')}_ratio"] = delta.ratio
    for key, value in diff.totals.items():
        if value.delta is not None:
            metrics[f"diff_{key}"] = value.delta
    ctx.headline = [f"check {'passed' if comparison.check.passed else 'not passed'}"] + [
        f"{d.metric} ratio {d.ratio:.3g} ({d.verdict})" for d in comparison.deltas if d.ratio
    ]
    ctx.write_report(comparison)
    ctx.write_report(diff, "compare_diff")
    ctx.write_metrics(metrics)


if __name__ == "__main__":
    stage_main("compare", KEYS, run, required=("candidate",), about=__doc__ or "")
