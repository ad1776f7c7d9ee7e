"""compare_benchmarks: the owner's output check first, then interleaved timing and verdicts.

Both sides are measured the same way (interleaved blocks, same warm-up and work units);
each delta carries a bootstrap interval and a verdict, and a failed check withholds every
delta without hiding it. Saved BenchmarkReports compare from their raw blocks.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..devices import (
    execution_record,
    is_synchronized,
    make_synchronize,
    resolve_device,
    unsynchronized_accelerator,
)
from ..measure.latency import (
    DEFAULT_TARGET_RELATIVE_IQR,
    Clock,
    latency_section,
    validate_latency_options,
)
from ..measure.memory import measure_peak_memory
from ..measure.stats import quantile, relative_iqr
from ..provenance import build_provenance
from ..report import (
    BenchmarkComparison,
    BenchmarkReport,
    CheckResult,
    Diagnostic,
    FlopReport,
    MemorySection,
    MetricResult,
    PerformanceDelta,
    load_report,
)
from ..workload_type import Workload
from .interleave import latency_verdict, ratio_of_medians, run_interleaved

DEFAULT_MIN_EFFECT = 0.05
DEFAULT_CONFIDENCE = 0.95
DEFAULT_RESAMPLES = 2000
DEFAULT_WARMUP_S = 0.1
DEFAULT_MIN_RUN_TIME_S = 1.0
DEFAULT_MAX_RUN_TIME_S = 10.0
DEFAULT_MIN_BLOCKS = 10
DEFAULT_MIN_BLOCK_TIME_S = 0.005
DEFAULT_MAX_NOISE = 0.05
DEFAULT_CI_FLOOR = 0.005

BenchmarkSource = BenchmarkReport | str | os.PathLike[str]
Check = Callable[[Any, Any], Any]


def _run_check(check: Check, base_out: Any, cand_out: Any) -> CheckResult:
    """The owner's check: a bool, a mapping or an object with ``passed`` (+ detail, tolerance).

    An exception or an answer of another type is a failed check with the error recorded.
    """
    try:
        answer = check(base_out, cand_out)
    except Exception as error:  # the owner's code: any failure is a failed check
        return CheckResult(performed=True, passed=False, error=f"{type(error).__name__}: {error}")
    answer = _plain_bool(answer)
    if isinstance(answer, bool):
        return CheckResult(performed=True, passed=answer)
    fields: Mapping[str, Any] | None = None
    if isinstance(answer, Mapping):
        fields = answer
    elif hasattr(answer, "passed"):
        fields = {name: getattr(answer, name, None) for name in ("passed", "detail", "tolerance")}
    passed = _plain_bool(fields.get("passed")) if fields is not None else None
    if fields is not None and isinstance(passed, bool):
        tolerance = fields.get("tolerance")
        return CheckResult(
            performed=True,
            passed=passed,
            detail=None if fields.get("detail") is None else str(fields["detail"]),
            tolerance=tolerance if _is_json_scalar_tree(tolerance) else repr(tolerance),
        )
    return CheckResult(
        performed=True,
        passed=False,
        error=(
            f"check returned {type(answer).__name__}; expected a bool, a mapping with a bool "
            "'passed' (and optional 'detail', 'tolerance'), or an object with those attributes"
        ),
    )


def _plain_bool(answer: Any) -> Any:
    """A one-element boolean tensor or a numpy bool (e.g. ``(a == b).all()``) as a bool."""
    dtype = getattr(answer, "dtype", None)
    if dtype is None or getattr(answer, "ndim", None) != 0:
        return answer
    if str(dtype) in ("torch.bool", "bool"):
        return bool(answer.item())
    return answer


def _is_json_scalar_tree(value: Any) -> bool:
    if isinstance(value, float) and not math.isfinite(value):
        return False  # JSON has no inf/nan: kept as its repr instead
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_is_json_scalar_tree(item) for item in value)
    if isinstance(value, Mapping):
        return all(isinstance(k, str) and _is_json_scalar_tree(v) for k, v in value.items())
    return False


def _first_call(workload: Workload, sync: Callable[[], None], clock: Clock) -> tuple[Any, float]:
    sync()
    start = clock()
    output = workload()
    sync()
    return output, clock() - start


@dataclass(frozen=True)
class _Judge:
    """The owner's decision settings, applied identically to every latency delta."""

    min_effect: float
    max_noise: float
    ci_floor: float
    min_blocks: int
    confidence: float
    resamples: int
    seed: int


def _latency_delta(
    base_blocks: list[float],
    cand_blocks: list[float],
    judge: _Judge,
    *,
    paired: bool,
    method: str,
) -> PerformanceDelta:
    """Warmed-latency delta with a bootstrap interval; few or noisy blocks give no verdict."""
    estimate = ratio_of_medians(
        base_blocks,
        cand_blocks,
        confidence=judge.confidence,
        resamples=judge.resamples,
        paired=paired,
        seed=judge.seed,
        floor=judge.ci_floor,
    )
    verdict, reason = latency_verdict(estimate, min_effect=judge.min_effect)
    noise = max(relative_iqr(base_blocks), relative_iqr(cand_blocks))
    if min(len(base_blocks), len(cand_blocks)) < judge.min_blocks:
        verdict, reason = "inconclusive", f"fewer than {judge.min_blocks} blocks; {reason}"
    elif noise > judge.max_noise and verdict != "no_difference":
        verdict = "inconclusive"
        reason = f"too noisy: IQR/median {noise:.1%} > max_noise {judge.max_noise:.1%}; {reason}"

    def result(blocks: list[float]) -> MetricResult:
        return MetricResult.complete(
            quantile(blocks, 0.5), unit="s", scope="warmed_block_average", method=method
        )

    return PerformanceDelta(
        metric="latency.warmed",
        unit="s",
        scope="warmed_block_average",
        method=method,
        baseline=result(base_blocks),
        candidate=result(cand_blocks),
        ratio=estimate.ratio,
        ci_low=estimate.low,
        ci_high=estimate.high,
        confidence=estimate.confidence,
        verdict=verdict,  # type: ignore[arg-type]
        reason=reason,
    )


def _throughput_delta(latency: PerformanceDelta, work_units: float, unit: str) -> PerformanceDelta:
    """Throughput = work_units / median latency: its ratio is the inverse of latency's."""
    assert latency.baseline.value and latency.candidate.value and latency.ratio
    method = "work_units_per_median_latency"
    scope = "warmed_block_average"

    def result(seconds: float) -> MetricResult:
        return MetricResult.complete(
            work_units / seconds, unit=f"{unit}/s", scope=scope, method=method
        )

    return PerformanceDelta(
        metric="throughput",
        unit=f"{unit}/s",
        scope=scope,
        method=method,
        baseline=result(float(latency.baseline.value)),
        candidate=result(float(latency.candidate.value)),
        ratio=1.0 / latency.ratio,
        ci_low=1.0 / latency.ci_high if latency.ci_high else None,
        ci_high=1.0 / latency.ci_low if latency.ci_low else None,
        confidence=latency.confidence,
        verdict=latency.verdict,
        reason=latency.reason,
    )


def _first_call_delta(base: float, cand: float, method: str) -> PerformanceDelta:
    def result(seconds: float) -> MetricResult:
        return MetricResult.complete(seconds, unit="s", scope="first_call", method=method)

    return PerformanceDelta(
        metric="latency.first_call",
        unit="s",
        scope="first_call",
        method=method,
        baseline=result(base),
        candidate=result(cand),
        ratio=cand / base if base > 0 else None,
        verdict="inconclusive",
        reason="one sample per side: first-call latency is shown, not judged",
    )


def _count_deltas(
    prefix: str,
    baseline: list[MetricResult],
    candidate: list[MetricResult],
    *,
    min_effect: float,
) -> list[PerformanceDelta]:
    """Deltas of single deterministic measurements (peak memory per scope, operator FLOPs).

    Only results of the same scope and method are paired, and a ratio is formed only when
    both are complete; anything else is ``inconclusive`` with the reason.
    """
    deltas: list[PerformanceDelta] = []
    for base in baseline:
        match = [c for c in candidate if (c.scope, c.method) == (base.scope, base.method)]
        if not match:
            continue
        cand = match[0]
        if base.status != "complete" or cand.status != "complete":
            verdict, ratio, reason = "inconclusive", None, "a side is not complete"
        else:
            assert base.value is not None and cand.value is not None
            ratio = cand.value / base.value if base.value > 0 else None
            if ratio is None:
                verdict, reason = "inconclusive", f"baseline is 0 {base.unit}"
            elif abs(ratio - 1.0) <= min_effect:
                verdict, reason = "no_difference", f"within the minimum effect {min_effect:.1%}"
            else:
                verdict = "increased" if ratio > 1.0 else "decreased"
                reason = "single deterministic measurement per side"
        deltas.append(
            PerformanceDelta(
                metric=f"{prefix}.{base.scope}",
                unit=base.unit,
                scope=base.scope,
                method=base.method,
                baseline=base,
                candidate=cand,
                ratio=ratio,
                verdict=verdict,  # type: ignore[arg-type]
                reason=reason,
            )
        )
    return deltas


def _memory_deltas(
    baseline: MemorySection | None, candidate: MemorySection | None, *, min_effect: float
) -> list[PerformanceDelta]:
    """Peak-memory deltas per scope (never across scopes)."""
    if baseline is None or candidate is None:
        return []
    return _count_deltas("memory", baseline.results, candidate.results, min_effect=min_effect)


def _flop_deltas(
    baseline: FlopReport | None, candidate: FlopReport | None, *, min_effect: float
) -> list[PerformanceDelta]:
    """Operator-FLOP deltas of one call (same scope and method only): the total, and its
    tensor-product share when both reports carry it (each compared only with its own kind)."""
    if baseline is None or candidate is None:
        return []
    deltas = _count_deltas("flops", [baseline.total], [candidate.total], min_effect=min_effect)
    if baseline.product_flops is not None and candidate.product_flops is not None:
        deltas += _count_deltas(
            "product_flops",
            [baseline.product_flops],
            [candidate.product_flops],
            min_effect=min_effect,
        )
    return deltas


def _withhold(deltas: list[PerformanceDelta], check: CheckResult) -> list[PerformanceDelta]:
    why = check.error or check.detail or "the owner's check returned False"
    return [
        delta.model_copy(
            update={
                "verdict": "withheld",
                "withheld": True,
                "reason": f"output check failed ({why}); was: {delta.verdict}",
            }
        )
        for delta in deltas
    ]


def compare_benchmarks(
    baseline: Workload | BenchmarkSource,
    candidate: Workload | BenchmarkSource,
    *,
    check: Check | None = None,
    work_units: float = 1,
    unit: str = "calls",
    warmup: float = DEFAULT_WARMUP_S,
    min_run_time: float = DEFAULT_MIN_RUN_TIME_S,
    max_run_time: float = DEFAULT_MAX_RUN_TIME_S,
    min_blocks: int = DEFAULT_MIN_BLOCKS,
    min_effect: float = DEFAULT_MIN_EFFECT,
    max_noise: float = DEFAULT_MAX_NOISE,
    ci_floor: float = DEFAULT_CI_FLOOR,
    confidence: float = DEFAULT_CONFIDENCE,
    resamples: int = DEFAULT_RESAMPLES,
    memory: bool = False,
    flops: bool = False,
    device: str | Any | None = None,
    baseline_name: str | None = None,
    candidate_name: str | None = None,
    seed: int = 0,
    clock: Clock | None = None,
) -> BenchmarkComparison:
    """Compare a candidate with its baseline: output check first, then timing.

    Workloads: both are called once and ``check(base_out, cand_out)`` (required) decides
    whether the outputs are acceptable; then both are timed the same way, interleaved. A
    failed check still returns the comparison, with every delta ``withheld``. Saved
    BenchmarkReports (or their paths) are compared from their raw blocks; the check is then
    recorded as not performed. ``min_effect`` is the smallest ratio change (default 5%) that
    counts as faster or slower; when either side's IQR/median exceeds ``max_noise`` (default
    5%) the verdict is ``inconclusive``: a noisy machine gives no verdict rather than a wrong
    one. ``ci_floor`` (default 0.5%) is the smallest relative half-width of an interval:
    blocks of one run do not show run-to-run variation. ``memory=True`` and ``flops=True``
    add peak-memory (per scope) and operator-FLOP deltas, each from one separate
    instrumented call per side. ``clock`` replaces time.perf_counter for every timed region
    (tests inject a simulated clock so that verdict logic never depends on the host's speed).
    """
    judge = _Judge(
        min_effect=min_effect,
        max_noise=max_noise,
        ci_floor=ci_floor,
        min_blocks=min_blocks,
        confidence=confidence,
        resamples=resamples,
        seed=seed,
    )
    _validate_judge(judge)
    settings: dict[str, Any] = {
        "min_effect": min_effect,
        "max_noise": max_noise,
        "ci_floor": ci_floor,
        "confidence": confidence,
        "resamples": resamples,
        "bootstrap_seed": seed,
        "min_blocks": min_blocks,
    }
    if callable(baseline) and callable(candidate):
        if check is None:
            raise TypeError(
                "compare_benchmarks(check=...) is required for workloads: the owner's output "
                "check decides whether the candidate's outputs are acceptable; nothing "
                "invents a default tolerance"
            )
        if not callable(check):
            raise TypeError(f"check must be callable(base_out, cand_out), got {check!r}")
        # the same argument checks as measure_latency, before either workload runs
        validate_latency_options(
            work_units=work_units,
            unit=unit,
            warmup=warmup,
            min_run_time=min_run_time,
            max_run_time=max_run_time,
            min_block_time=DEFAULT_MIN_BLOCK_TIME_S,
            min_blocks=min_blocks,
            target_relative_iqr=DEFAULT_TARGET_RELATIVE_IQR,
            noise_threshold=max_noise,
            clock=clock,
        )
        return _compare_workloads(
            baseline,
            candidate,
            check=check,
            work_units=work_units,
            unit=unit,
            warmup=warmup,
            min_run_time=min_run_time,
            max_run_time=max_run_time,
            judge=judge,
            memory=memory,
            flops=flops,
            device=device,
            settings=settings,
            names=(baseline_name, candidate_name),
            clock=clock,
        )
    if callable(baseline) or callable(candidate):
        raise TypeError(
            "compare_benchmarks needs two workloads or two saved BenchmarkReports, got a mix "
            f"({type(baseline).__name__} and {type(candidate).__name__})"
        )
    base_report = _as_benchmark(baseline, "baseline")
    cand_report = _as_benchmark(candidate, "candidate")
    comparison = _compare_saved(
        base_report,
        cand_report,
        judge=judge,
        settings=settings,
        names=(baseline_name, candidate_name),
    )
    if check is not None:  # saved reports keep no outputs: the check cannot run
        comparison.diagnostics.append(
            Diagnostic(
                code="check_not_performed",
                severity="warning",
                message="a check was passed, but saved reports keep no outputs, so it was not "
                "run; compare the workloads themselves to check their outputs",
            )
        )
    return comparison


def _validate_judge(judge: _Judge) -> None:
    if not 0.0 <= judge.min_effect < 1.0:
        raise ValueError(f"min_effect must be in [0, 1), got {judge.min_effect!r}")
    if judge.ci_floor < 0.0 or (judge.ci_floor > 0.0 and judge.ci_floor >= judge.min_effect):
        raise ValueError(
            "ci_floor must be in [0, min_effect) so that a real effect can be told apart, got "
            f"ci_floor={judge.ci_floor!r} with min_effect={judge.min_effect!r}"
        )
    if not judge.max_noise > 0.0:
        raise ValueError(f"max_noise must be > 0, got {judge.max_noise!r}")
    if not 0.5 <= judge.confidence < 1.0:
        raise ValueError(f"confidence must be in [0.5, 1), got {judge.confidence!r}")
    if judge.resamples < 100:
        raise ValueError(f"resamples must be >= 100, got {judge.resamples!r}")
    if judge.min_blocks < 3:
        raise ValueError(f"min_blocks must be >= 3, got {judge.min_blocks!r}")


def _as_benchmark(report: Any, argument: str) -> BenchmarkReport:
    if isinstance(report, (str, os.PathLike)):
        report = load_report(report)
    if isinstance(report, BenchmarkReport):
        return report
    kind = getattr(report, "kind", type(report).__name__)
    hint = " (model cost is compared with compare_reports)" if kind == "analysis" else ""
    raise TypeError(
        f"compare_benchmarks({argument}=...) expects a zero-argument workload or a saved "
        f"BenchmarkReport, got {kind!r}{hint}"
    )


def _compare_workloads(
    baseline: Workload,
    candidate: Workload,
    *,
    check: Check,
    work_units: float,
    unit: str,
    warmup: float,
    min_run_time: float,
    max_run_time: float,
    judge: _Judge,
    memory: bool,
    flops: bool,
    device: Any,
    settings: dict[str, Any],
    names: tuple[str | None, str | None],
    clock: Clock | None,
) -> BenchmarkComparison:
    resolved = resolve_device(device)
    sync = make_synchronize(resolved)
    method = "wall_clock_synchronized" if is_synchronized(resolved) else "wall_clock"
    timer = "injected clock" if clock is not None else "time.perf_counter"
    if clock is None:
        clock = time.perf_counter
    base_out, base_first = _first_call(baseline, sync, clock)
    cand_out, cand_first = _first_call(candidate, sync, clock)
    check_result = _run_check(check, base_out, cand_out)
    del base_out, cand_out
    run = run_interleaved(
        baseline,
        candidate,
        sync=sync,
        warmup=warmup,
        min_run_time=min_run_time,
        max_run_time=max_run_time,
        min_blocks=judge.min_blocks,
        min_block_time=DEFAULT_MIN_BLOCK_TIME_S,
        clock=clock,
    )
    settings = {
        **settings,
        "interleaved": True,
        "paired_bootstrap": True,
        "warmup_s": warmup,
        "min_run_time_s": min_run_time,
        "max_run_time_s": max_run_time,
        "work_units": work_units,
        "unit": unit,
    }
    diagnostics: list[Diagnostic] = []
    warning = unsynchronized_accelerator(resolved, "latency.warmed")
    if warning is not None:
        diagnostics.append(warning)
    if len(run.baseline_blocks) < judge.min_blocks:
        diagnostics.append(
            Diagnostic(
                code="too_few_blocks",
                metric="latency.warmed",
                message=f"only {len(run.baseline_blocks)} rounds fit in max_run_time "
                f"({max_run_time} s); at least {judge.min_blocks} are needed for a verdict",
            )
        )
    sides = [
        latency_section(
            blocks,
            first,
            work_units=work_units,
            unit=unit,
            synchronized=is_synchronized(resolved),
            calls_per_block=per_block,
            warmup_calls=run.warmup_calls,
            total_time_s=run.total_time_s,
            noise_threshold=judge.max_noise,
            timer=timer,
            settings=settings,
        )
        for blocks, first, per_block in (
            (run.baseline_blocks, base_first, run.baseline_calls_per_block),
            (run.candidate_blocks, cand_first, run.candidate_calls_per_block),
        )
    ]
    latency = _latency_delta(
        run.baseline_blocks, run.candidate_blocks, judge, paired=True, method=method
    )
    deltas = [
        latency,
        _throughput_delta(latency, work_units, unit),
        _first_call_delta(base_first, cand_first, method),
    ]
    memory_sections: list[MemorySection | None] = [None, None]
    if memory:
        memory_sections = [
            measure_peak_memory(baseline, device=resolved).memory,
            measure_peak_memory(candidate, device=resolved).memory,
        ]
        deltas += _memory_deltas(*memory_sections, min_effect=judge.min_effect)
    flop_reports: list[FlopReport | None] = [None, None]
    if flops:  # a separate instrumented call per side, never during timing
        from ..analysis.operators import measure_flops

        flop_reports = [measure_flops(baseline), measure_flops(candidate)]
        deltas += _flop_deltas(*flop_reports, min_effect=judge.min_effect)
    if check_result.passed is False:
        deltas = _withhold(deltas, check_result)
        diagnostics.append(
            Diagnostic(
                code="check_failed",
                severity="error",
                message="the owner's output check failed; every performance delta is withheld",
            )
        )
    reports = []
    for index, ((section, side_diagnostics), name) in enumerate(zip(sides, names, strict=True)):
        side_calls = run.calls_made // 2 + 1
        reports.append(
            BenchmarkReport(
                provenance=build_provenance(),
                name=name,
                work_units=work_units,
                unit=unit,
                execution=execution_record(resolved, {"compare": side_calls}),
                latency=section,
                memory=memory_sections[index],
                flops=flop_reports[index],
                diagnostics=side_diagnostics,
            )
        )
    return BenchmarkComparison(
        provenance=build_provenance(),
        baseline_name=names[0],
        candidate_name=names[1],
        check=check_result,
        deltas=deltas,
        settings=settings,
        baseline=reports[0],
        candidate=reports[1],
        diagnostics=diagnostics,
    )


def _comparability(base: BenchmarkReport, cand: BenchmarkReport) -> list[str]:
    """What differs between two saved reports in a way that makes timing incomparable."""
    fields = {
        "device": (base.execution.device, cand.execution.device),
        "precision": (base.execution.precision, cand.execution.precision),
        "num_threads": (base.execution.num_threads, cand.execution.num_threads),
        "grad_enabled": (base.execution.grad_enabled, cand.execution.grad_enabled),
        "torch_version": (base.provenance.torch_version, cand.provenance.torch_version),
        "env_hash": (base.provenance.env_hash, cand.provenance.env_hash),
        "unit": (base.unit, cand.unit),
        "work_units": (base.work_units, cand.work_units),
    }
    return [
        f"{name} is different: baseline={old!r}, candidate={new!r}"
        for name, (old, new) in fields.items()
        if old != new
    ]


def _compare_saved(
    base: BenchmarkReport,
    cand: BenchmarkReport,
    *,
    judge: _Judge,
    settings: dict[str, Any],
    names: tuple[str | None, str | None],
) -> BenchmarkComparison:
    check_result = CheckResult(
        performed=False,
        passed=None,
        detail="saved reports were compared: their outputs are not kept, so no check ran",
    )
    differences = _comparability(base, cand)
    diagnostics = [
        Diagnostic(code="not_comparable", severity="warning", message=message)
        for message in differences
    ]
    deltas: list[PerformanceDelta] = []
    if base.latency is not None and cand.latency is not None:
        if base.latency.warmed.method != cand.latency.warmed.method:
            differences.append(
                f"latency method is different: baseline={base.latency.warmed.method!r}, "
                f"candidate={cand.latency.warmed.method!r}"
            )
        blocks = (base.latency.block_times_s, cand.latency.block_times_s)
        if all(blocks) and base.latency.warmed.is_complete and cand.latency.warmed.is_complete:
            latency = _latency_delta(
                blocks[0], blocks[1], judge, paired=False, method=base.latency.warmed.method
            )
            deltas += [latency, _throughput_delta(latency, base.work_units, base.unit)]
        else:
            diagnostics.append(
                Diagnostic(
                    code="incomplete_latency",
                    metric="latency.warmed",
                    message="a side has no complete warmed latency with raw blocks; not compared",
                )
            )
    deltas += _memory_deltas(base.memory, cand.memory, min_effect=judge.min_effect)
    deltas += _flop_deltas(base.flops, cand.flops, min_effect=judge.min_effect)
    if differences:
        reason = "; ".join(differences)
        deltas = [
            delta.model_copy(update={"verdict": "not_comparable", "reason": reason})
            for delta in deltas
        ]
    return BenchmarkComparison(
        provenance=build_provenance(),
        baseline_name=names[0] or base.name,
        candidate_name=names[1] or cand.name,
        check=check_result,
        deltas=deltas,
        settings={**settings, "paired_bootstrap": False},
        baseline=base,
        candidate=cand,
        diagnostics=diagnostics,
    )
