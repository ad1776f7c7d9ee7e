"""The configured candidate against its baseline: the one library call of the compare stage.

Builds both workloads from the composed pipeline config, compares them with
compare_benchmarks (the owner's allclose check, tolerance from ``candidate.tolerance``, no
default) and diffs the two models' crawl reports. A candidate that cannot be built or run
here (e.g. torch.compile without a working compiler) becomes a ``candidate_failed``
comparison with no numbers, never a crash or a fabricated delta. A ``compile`` candidate's
first call (compile + one run) is recorded on its own (``comparison.compile``, scope
``compile_first_call``) with Dynamo's compiled-frame counts, apart from warmed latency.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

from ..report import BenchmarkComparison, CheckResult, CompileRecord, Diagnostic, ReportDiff
from ..workloads import compiled_frames


@dataclass(frozen=True)
class CandidateComparison:
    """The two reports the stage writes, and its flat metrics (complete values only)."""

    comparison: BenchmarkComparison
    diff: ReportDiff

    def metrics(self) -> dict[str, Any]:
        metrics: dict[str, Any] = {}
        if self.comparison.check.passed is not None:
            metrics["check_passed"] = int(self.comparison.check.passed)
        for delta in self.comparison.deltas:
            if delta.ratio is not None and not delta.withheld:
                metrics[f"{delta.metric.replace('.', '_')}_ratio"] = delta.ratio
        for key, value in self.diff.totals.items():
            if value.delta is not None:
                metrics[f"diff_{key}"] = value.delta
        record = self.comparison.compile
        if record is not None and record.first_call.is_complete:
            metrics["compile_first_call_s"] = record.first_call.value
        return metrics


class CompileWatch:
    """A candidate workload that counts Dynamo's compiled frames over its first call and
    over every later one (compare_benchmarks' first call of a side is its timed first call)."""

    def __init__(self, call: Callable[[], Any]) -> None:
        self._call = call
        self.calls = 0
        self.first = self.after = 0

    def __call__(self) -> Any:
        before = compiled_frames()
        try:
            return self._call()
        finally:
            compiled = compiled_frames() - before
            if self.calls == 0:
                self.first = compiled
            else:
                self.after += compiled
            self.calls += 1


def compile_record(
    comparison: BenchmarkComparison, spec: Any, watch: CompileWatch
) -> CompileRecord | None:
    """The candidate's timed first call as its compile record, with what Dynamo compiled;
    a first call that compiled nothing, or compiling later, is said on the comparison."""
    side = comparison.candidate
    if side is None or side.latency is None:
        return None  # the candidate failed before it was timed: nothing to record
    first = side.latency.first_call.model_copy(update={"scope": "compile_first_call"})
    if watch.first == 0:
        comparison.diagnostics.append(
            Diagnostic(
                code="compile_not_in_first_call",
                severity="warning",
                metric="compile.first_call",
                message="the compiled candidate's first call compiled no frame (compiled "
                "earlier in this process, or Dynamo skipped the model): its first-call time "
                "is not a compile time",
            )
        )
    if watch.after:
        comparison.diagnostics.append(
            Diagnostic(
                code="recompiled_after_first_call",
                severity="warning",
                metric="latency.warmed",
                count=watch.after,
                message=f"Dynamo compiled {watch.after} frame(s) after the candidate's first "
                "call (a guard failed: shapes, dtypes, grad mode); the warmed rounds may "
                "include compile time",
            )
        )
    return CompileRecord(
        backend=spec.backend,
        mode=spec.mode,
        first_call=first,
        frames_compiled_first_call=watch.first,
        frames_compiled_after=watch.after,
    )


def _failed(candidate_name: str, error: BaseException) -> BenchmarkComparison:
    from ..provenance import build_provenance

    message = f"candidate {candidate_name!r} failed: {type(error).__name__}: {error}"
    message = " ".join(message.split())[:2000]
    return BenchmarkComparison(
        provenance=build_provenance(),
        baseline_name="baseline",
        candidate_name=candidate_name,
        check=CheckResult(performed=False, passed=None, error=message),
        deltas=[],
        diagnostics=[Diagnostic(code="candidate_failed", severity="error", message=message)],
    )


def _timed_comparison(
    cfg: Any, baseline: Any, timed: Callable[[], AbstractContextManager[Any]]
) -> BenchmarkComparison:
    """compare_benchmarks over the configured pair; a failing candidate is recorded."""
    from ..compare.benchmarks import compare_benchmarks
    from ..compare.checks import allclose_check
    from .workload import build_workload

    rtol, atol = cfg.candidate.tolerance.required()
    failures: list[BaseException] = []
    try:
        candidate = build_workload(cfg, candidate=cfg.candidate)
    except Exception as error:  # e.g. torch.compile refusing this model or backend
        return _failed(cfg.candidate.name, error)

    def candidate_call() -> Any:
        try:
            return candidate()
        except Exception as error:
            failures.append(error)
            raise

    spec = cfg.candidate.compile
    watched = CompileWatch(candidate_call)
    try:
        with timed():
            comparison = compare_benchmarks(
                baseline,
                watched if spec is not None else candidate_call,
                check=allclose_check(rtol, atol),
                work_units=cfg.input.work_units,
                unit=cfg.input.unit,
                memory=True,
                device=baseline.device,
                baseline_name=baseline.name,
                candidate_name=candidate.name,
                options={
                    "warmup": cfg.compare.warmup,
                    "min_run_time": cfg.compare.min_run_time,
                    "max_run_time": cfg.compare.max_run_time,
                },
                judge={"seed": cfg.seed},
            )
    except Exception:
        if not failures:
            raise
        return _failed(cfg.candidate.name, failures[0])
    if spec is not None:
        comparison.compile = compile_record(comparison, spec, watched)
    record_sides(comparison, cfg)
    return comparison


def record_sides(comparison: BenchmarkComparison, cfg: Any) -> None:
    """Each side's own precision (the candidate's, else the baseline's), the threads both
    ran at and the input, on the sides' execution records, where a page reads them."""
    from .runner import record_execution

    own = cfg.candidate.precision or cfg.precision
    for side, precision in ((comparison.baseline, cfg.precision), (comparison.candidate, own)):
        if side is not None:
            record_execution(side, precision, cfg, threads=True)


def compare_configured_candidate(
    cfg: Any, timed: Callable[[], AbstractContextManager[Any]] = nullcontext
) -> CandidateComparison:
    """Baseline vs ``cfg.candidate`` (timing, check, memory) and the two models' crawl diff.

    ``timed`` wraps the timed comparison only (the pipeline's host timing lock), not the
    builds or the crawl diff."""
    from ..analysis.crawl import crawl_module
    from ..compare.reports import compare_reports
    from .workload import build_workload, thread_settings

    cfg.candidate.tolerance.required()  # the owner's tolerance, before anything runs
    baseline = build_workload(cfg)
    with thread_settings(cfg.threads):
        comparison = _timed_comparison(cfg, baseline, timed)
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
    return CandidateComparison(comparison=comparison, diff=diff)
