"""compare_benchmarks: the owner's output check first, then interleaved timing and verdicts.

Both sides are measured the same way (interleaved blocks, same warm-up and work units,
adaptive rounds until the interval is narrower than the minimum effect or the time budget
is spent); each delta carries a bootstrap interval and a verdict, and a failed check
withholds every delta without hiding it. Saved BenchmarkReports compare from their raw
blocks. Deltas are built in :mod:`.deltas`, the check is read in :mod:`.checks`.
"""

from __future__ import annotations

import os
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
from ..measure.host import HostMonitor, classify_blocks, host_diagnostics
from ..measure.latency import latency_section
from ..measure.latency_options import COMPARE_DEFAULTS, Clock, LatencyOptions, validate_work
from ..measure.memory import measure_peak_memory
from ..provenance import build_provenance
from ..report import (
    BenchmarkComparison,
    BenchmarkReport,
    CheckResult,
    Diagnostic,
    FlopReport,
    HostState,
    MemorySection,
    PerformanceDelta,
    report_of_kind,
)
from ..stats import relative_iqr
from ..workloads import Workload
from .checks import Check, run_check
from .deltas import (
    DEFAULT_CI_FLOOR,
    DEFAULT_CONFIDENCE,
    DEFAULT_MAX_NOISE,
    DEFAULT_MIN_EFFECT,
    DEFAULT_RESAMPLES,
    Judge,
    first_call_delta,
    flop_deltas,
    latency_delta,
    memory_deltas,
    noise_diagnostic,
    throughput_delta,
    withhold,
)
from .interleave import InterleavedRun, run_interleaved
from .judging import PairedOutcome, paired_deltas
from .paired import rounds_record

# The timing defaults live in LatencyOptions (COMPARE_DEFAULTS); these names stay for code
# that imported them.
DEFAULT_WARMUP_S = COMPARE_DEFAULTS.warmup
DEFAULT_MIN_RUN_TIME_S = COMPARE_DEFAULTS.min_run_time
DEFAULT_MAX_RUN_TIME_S = COMPARE_DEFAULTS.max_run_time
DEFAULT_MIN_BLOCKS = COMPARE_DEFAULTS.min_blocks
DEFAULT_MIN_BLOCK_TIME_S = COMPARE_DEFAULTS.min_block_time
__all__ = [
    "DEFAULT_CI_FLOOR",
    "DEFAULT_CONFIDENCE",
    "DEFAULT_MAX_NOISE",
    "DEFAULT_MIN_EFFECT",
    "DEFAULT_RESAMPLES",
    "compare_benchmarks",
]

BenchmarkSource = BenchmarkReport | str | os.PathLike[str]


def compare_benchmarks(
    baseline: Workload | BenchmarkSource,
    candidate: Workload | BenchmarkSource,
    *,
    check: Check | None = None,
    work_units: float = 1,
    unit: str = "calls",
    warmup: float = COMPARE_DEFAULTS.warmup,
    min_run_time: float = COMPARE_DEFAULTS.min_run_time,
    max_run_time: float = COMPARE_DEFAULTS.max_run_time,
    min_blocks: int = COMPARE_DEFAULTS.min_blocks,
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
    options: LatencyOptions | Mapping[str, Any] | None = None,
    judge: Judge | Mapping[str, Any] | None = None,
) -> BenchmarkComparison:
    """Compare a candidate with its baseline: output check first, then timing.

    Workloads: both are called once and ``check(base_out, cand_out)`` (required) decides
    whether the outputs are acceptable; then both are timed the same way, interleaved, in
    rounds until the latency interval is narrower than ``min_effect`` or ``max_run_time``
    (the time budget) is spent; ``settings["stop_reason"]`` says which. A failed check
    still returns the comparison, with every delta ``withheld``. Saved BenchmarkReports (or
    their paths) are compared from their raw blocks; the check is then recorded as not
    performed. ``min_effect`` is the smallest ratio change (default 5%) that counts as
    faster or slower: the verdict is faster/slower when the interval excludes no change and
    the ratio is beyond it, and ``inconclusive`` only when the interval does not decide.
    Block noise above ``max_noise`` is a ``latency_noisy`` warning beside the verdict.
    ``ci_floor`` (default 0.5%) is the smallest relative half-width of an interval.
    ``memory=True`` and ``flops=True`` add peak-memory (per scope) and operator-FLOP deltas,
    each from one separate instrumented call per side. ``clock`` replaces time.perf_counter
    for every timed region (tests inject a simulated clock).

    ``options`` (a :class:`LatencyOptions` or a mapping of its fields) and ``judge`` (a
    :class:`Judge` or a mapping) carry the same settings as one object each; the flat
    keywords build them when these are not given, and giving both ways is refused.
    """
    flat = {
        "warmup": warmup,
        "min_run_time": min_run_time,
        "max_run_time": max_run_time,
        "min_blocks": min_blocks,
        "clock": clock,
    }
    rules = {
        "min_effect": min_effect,
        "max_noise": max_noise,
        "ci_floor": ci_floor,
        "confidence": confidence,
        "resamples": resamples,
        "seed": seed,
    }
    timing, judge = _settings(flat, rules, options, judge)
    names = (baseline_name, candidate_name)
    if callable(baseline) and callable(candidate):
        if check is None:
            raise TypeError(
                "compare_benchmarks(check=...) is required for workloads: the owner's output "
                "check decides whether the candidate's outputs are acceptable; nothing "
                "invents a default tolerance"
            )
        if not callable(check):
            raise TypeError(f"check must be callable(base_out, cand_out), got {check!r}")
        # the same option checks as measure_latency, before either workload runs
        validate_work(work_units, unit)
        pair = _Pair(baseline, candidate, check, work_units, unit, names)
        return _compare_workloads(pair, timing, judge, memory=memory, flops=flops, device=device)
    if callable(baseline) or callable(candidate):
        raise TypeError(
            "compare_benchmarks needs two workloads or two saved BenchmarkReports, got a mix "
            f"({type(baseline).__name__} and {type(candidate).__name__})"
        )
    comparison = _compare_saved(
        _as_benchmark(baseline, "baseline"), _as_benchmark(candidate, "candidate"), judge, names
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


_COMPARE_JUDGE = Judge()


def _settings(
    flat: dict[str, Any],
    rules: dict[str, Any],
    options: LatencyOptions | Mapping[str, Any] | None,
    judge: Judge | Mapping[str, Any] | None,
) -> tuple[LatencyOptions, Judge]:
    """LatencyOptions and Judge from ``options=``/``judge=`` or from the flat keywords;
    a flat keyword moved from its default beside the object is refused (which one wins
    would be a guess)."""
    defaults = {name: getattr(COMPARE_DEFAULTS, name) for name in flat}
    rule_defaults = {name: getattr(_COMPARE_JUDGE, name) for name in rules}
    for given, values, base, label in (
        (options, flat, defaults, "options"),
        (judge, rules, rule_defaults, "judge"),
    ):
        moved = sorted(name for name, value in values.items() if value != base[name])
        if given is not None and moved:
            raise TypeError(
                f"compare_benchmarks got {label}= and the keyword(s) {moved}: pass each "
                f"setting once, inside {label}= or as a keyword"
            )
    if judge is not None:
        rule = Judge.from_mapping(judge)
    else:
        rule = Judge(min_blocks=flat["min_blocks"], **rules)
    if options is not None:
        return LatencyOptions.from_mapping(options, base=COMPARE_DEFAULTS), rule
    timing = LatencyOptions(
        **flat,
        min_block_time=COMPARE_DEFAULTS.min_block_time,
        noise_threshold=rule.max_noise,
    )
    return timing, rule


def _as_benchmark(report: Any, argument: str) -> BenchmarkReport:
    def refusal(kind: str) -> str:
        hint = " (model cost is compared with compare_reports)" if kind == "analysis" else ""
        return (
            f"compare_benchmarks({argument}=...) expects a zero-argument workload or a saved "
            f"BenchmarkReport, got {kind!r}{hint}"
        )

    return report_of_kind(report, BenchmarkReport, refusal)


@dataclass(frozen=True)
class _Pair:
    """The two workloads with what the owner declared about them."""

    baseline: Workload
    candidate: Workload
    check: Check
    work_units: float
    unit: str
    names: tuple[str | None, str | None]


@dataclass
class _Timed:
    """What the interleaved pass produced."""

    run: InterleavedRun
    first_calls: tuple[float, float]
    check: CheckResult
    host: HostState | None
    method: str


def _first_call(workload: Workload, sync: Callable[[], None], clock: Clock) -> tuple[Any, float]:
    sync()
    start = clock()
    output = workload()
    sync()
    return output, clock() - start


def _time_pair(
    pair: _Pair, options: LatencyOptions, judge: Judge, device: Any, sync: Callable[[], None]
) -> _Timed:
    """First calls, the owner's check on their outputs, then interleaved adaptive rounds."""
    import time

    clock = options.clock if options.clock is not None else time.perf_counter
    monitor = HostMonitor() if options.clock is None else None
    base_out, base_first = _first_call(pair.baseline, sync, clock)
    cand_out, cand_first = _first_call(pair.candidate, sync, clock)
    check_result = run_check(pair.check, base_out, cand_out)
    del base_out, cand_out
    run = run_interleaved(
        pair.baseline,
        pair.candidate,
        sync=sync,
        options=options,
        enough=judge.settled,
        control=judge.aa_control,
        seed=judge.seed,
    )
    method = "wall_clock_synchronized" if is_synchronized(device) else "wall_clock"
    host = monitor.finish() if monitor is not None else None
    return _Timed(run, (base_first, cand_first), check_result, host, method)


def _side_reports(
    pair: _Pair, timed: _Timed, options: LatencyOptions, device: Any, settings: dict[str, Any]
) -> tuple[list[BenchmarkReport], list[Diagnostic]]:
    """Each side's latency report (sections built as measure_latency builds them)."""
    run = timed.run
    reports: list[BenchmarkReport] = []
    diagnostics: list[Diagnostic] = []
    sides = (
        (run.baseline_blocks, run.baseline_trace, run.baseline_calls_per_block),
        (run.candidate_blocks, run.candidate_trace, run.candidate_calls_per_block),
    )
    for index, (blocks, trace, per_block) in enumerate(sides):
        noise = classify_blocks(blocks, trace)
        section, side_diagnostics = latency_section(
            blocks,
            timed.first_calls[index],
            work_units=pair.work_units,
            unit=pair.unit,
            synchronized=is_synchronized(device),
            calls_per_block=per_block,
            warmup_calls=run.warmup_calls,
            total_time_s=run.total_time_s,
            noise_threshold=options.noise_threshold,
            timer=options.timer,
            settings=settings,
            stop_reason=run.stop_reason,
            min_blocks=options.min_blocks,
            noise=noise,
        )
        if timed.host is not None:
            side_diagnostics += host_diagnostics(timed.host, noise, "latency.warmed")
        if index == 0:
            diagnostics += [d for d in side_diagnostics if d.code in ("too_few_blocks",)]
        reports.append(
            BenchmarkReport(
                provenance=build_provenance(host=timed.host),
                name=pair.names[index],
                work_units=pair.work_units,
                unit=pair.unit,
                execution=execution_record(device, {"compare": run.calls_made // 2 + 1}),
                latency=section,
                diagnostics=side_diagnostics,
            )
        )
    return reports, diagnostics


def _instrumented_deltas(
    pair: _Pair, reports: list[BenchmarkReport], judge: Judge, device: Any, flags: tuple[bool, bool]
) -> list[PerformanceDelta]:
    """Peak memory and operator FLOPs: one separate instrumented call per side, never timed."""
    memory, flops = flags
    deltas: list[PerformanceDelta] = []
    if memory:
        sections: list[MemorySection | None] = [
            measure_peak_memory(pair.baseline, device=device).memory,
            measure_peak_memory(pair.candidate, device=device).memory,
        ]
        for report, section in zip(reports, sections, strict=True):
            report.memory = section
        deltas += memory_deltas(*sections, min_effect=judge.min_effect)
    if flops:
        from ..analysis.operators import measure_flops

        counted: list[FlopReport | None] = [
            measure_flops(pair.baseline),
            measure_flops(pair.candidate),
        ]
        for report, flop_report in zip(reports, counted, strict=True):
            report.flops = flop_report
        deltas += flop_deltas(*counted, min_effect=judge.min_effect)
    return deltas


def _compare_workloads(
    pair: _Pair,
    options: LatencyOptions,
    judge: Judge,
    *,
    memory: bool,
    flops: bool,
    device: Any,
) -> BenchmarkComparison:
    resolved = resolve_device(device)
    timed = _time_pair(pair, options, judge, resolved, make_synchronize(resolved))
    run = timed.run
    settings: dict[str, Any] = {
        **judge.settings(),
        **options.settings(),
        "interleaved": True,
        "paired_bootstrap": True,
        "stop_reason": run.stop_reason,
        "rounds": len(run.baseline_blocks),
        "work_units": pair.work_units,
        "unit": pair.unit,
    }
    reports, diagnostics = _side_reports(pair, timed, options, resolved, settings)
    warning = unsynchronized_accelerator(resolved, "latency.warmed")
    if warning is not None:
        diagnostics.append(warning)
    outcome = paired_deltas(run, judge, timed.method, timed.host)
    settings["paired"] = outcome.summary
    latency = _with_noise(outcome, run, judge, diagnostics)
    diagnostics += outcome.diagnostics
    if timed.host is not None:
        diagnostics += host_diagnostics(timed.host, None, "latency.warmed")
    deltas = [
        latency,
        throughput_delta(latency, pair.work_units, pair.unit),
        first_call_delta(*timed.first_calls, timed.method),
    ]
    deltas += [d for d in (outcome.control, outcome.cpu_time) if d is not None]
    deltas += _instrumented_deltas(pair, reports, judge, resolved, (memory, flops))
    if timed.check.passed is False:
        deltas = withhold(deltas, timed.check)
        diagnostics.append(
            Diagnostic(
                code="check_failed",
                severity="error",
                message="the owner's output check failed; every performance delta is withheld",
            )
        )
    return BenchmarkComparison(
        provenance=build_provenance(host=timed.host),
        baseline_name=pair.names[0],
        candidate_name=pair.names[1],
        check=timed.check,
        deltas=deltas,
        settings=settings,
        baseline=reports[0],
        candidate=reports[1],
        diagnostics=diagnostics,
        interleaved_rounds=rounds_record(run),
    )


def _with_noise(
    outcome: PairedOutcome, run: InterleavedRun, judge: Judge, diagnostics: list[Diagnostic]
) -> PerformanceDelta:
    """The ``latency_noisy`` warning beside the verdict (never instead of it), naming what
    decided the verdict."""
    latency = outcome.latency
    noise = max(relative_iqr(run.baseline_blocks), relative_iqr(run.candidate_blocks))
    if noise <= judge.max_noise:
        return latency
    decided_by = str(outcome.summary.get("decided_by", "the interval"))
    diagnostics.append(noise_diagnostic(noise, judge, latency.verdict, decided_by))
    reason = f"{latency.reason}; noise warning: IQR/median {noise:.1%} > {judge.max_noise:.1%}"
    return latency.model_copy(update={"reason": reason})


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
    if base.latency is not None and cand.latency is not None:
        fields["latency method"] = (base.latency.warmed.method, cand.latency.warmed.method)
    return [
        f"{name} is different: baseline={old!r}, candidate={new!r}"
        for name, (old, new) in fields.items()
        if old != new
    ]


def _compare_saved(
    base: BenchmarkReport,
    cand: BenchmarkReport,
    judge: Judge,
    names: tuple[str | None, str | None],
) -> BenchmarkComparison:
    check_result = CheckResult(
        performed=False,
        passed=None,
        detail="saved reports were compared: their outputs are not kept, so no check ran",
    )
    # every difference is known before any diagnostic or verdict is built from the list
    differences = _comparability(base, cand)
    diagnostics = [
        Diagnostic(code="not_comparable", severity="warning", message=message)
        for message in differences
    ]
    deltas: list[PerformanceDelta] = []
    if base.latency is not None and cand.latency is not None:
        blocks = (base.latency.block_times_s, cand.latency.block_times_s)
        if all(blocks) and base.latency.warmed.is_complete and cand.latency.warmed.is_complete:
            latency, noisy = latency_delta(
                blocks[0], blocks[1], judge, paired=False, method=base.latency.warmed.method
            )
            diagnostics += noisy
            deltas += [latency, throughput_delta(latency, base.work_units, base.unit)]
        else:
            diagnostics.append(
                Diagnostic(
                    code="incomplete_latency",
                    metric="latency.warmed",
                    message="a side has no complete warmed latency with raw blocks; not compared",
                )
            )
    deltas += memory_deltas(base.memory, cand.memory, min_effect=judge.min_effect)
    deltas += flop_deltas(base.flops, cand.flops, min_effect=judge.min_effect)
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
        settings={**judge.settings(), "paired_bootstrap": False},
        baseline=base,
        candidate=cand,
        diagnostics=diagnostics,
    )
