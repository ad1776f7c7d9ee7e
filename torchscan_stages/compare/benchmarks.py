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
from dataclasses import dataclass, replace
from typing import Any

from ..devices import (
    execution_record,
    is_synchronized,
    make_synchronize,
    resolve_device,
    unsynchronized_accelerator,
)
from ..measure.block_summary import SampledBlocks, latency_section
from ..measure.host import HostMonitor, classify_blocks, host_diagnostics
from ..measure.latency import first_call
from ..measure.latency_options import (
    COMPARE_DEFAULTS,
    MEASURE_DEFAULTS,
    LatencyOptions,
    moved_into_options,
    validate_work,
)
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

__all__ = ["compare_benchmarks"]

BenchmarkSource = BenchmarkReport | str | os.PathLike[str]


@moved_into_options(judge=Judge, options=LatencyOptions)
# too many arguments: the public entry; beyond the spec's check=, each is a per-call input
# (what is timed, its work, the extra passes, the names): every setting is in options=/judge=
def compare_benchmarks(  # noqa: PLR0913
    baseline: Workload | BenchmarkSource,
    candidate: Workload | BenchmarkSource,
    *,
    check: Check | None = None,
    work_units: float = 1,
    unit: str = "calls",
    memory: bool = False,
    flops: bool = False,
    device: str | Any | None = None,
    baseline_name: str | None = None,
    candidate_name: str | None = None,
    options: LatencyOptions | Mapping[str, Any] | None = None,
    judge: Judge | Mapping[str, Any] | None = None,
) -> BenchmarkComparison:
    """Compare a candidate with its baseline: output check first, then timing.

    Workloads: both are called once and ``check(base_out, cand_out)`` (required) decides
    whether the outputs are acceptable; then both are timed the same way, interleaved, in
    rounds until the latency interval is narrower than the judge's ``min_effect`` or
    ``max_run_time`` (the time budget) is spent; ``settings["stop_reason"]`` says which. A
    failed check still returns the comparison, with every delta ``withheld``. Saved
    BenchmarkReports (or their paths) are compared from their raw blocks; the check is then
    recorded as not performed. ``memory=True`` and ``flops=True`` add peak-memory (per
    scope) and operator-FLOP deltas, each from one separate instrumented call per side.

    Every setting has one way in. ``options`` (a :class:`LatencyOptions` or a mapping of its
    fields over the comparison's defaults) is the timing: warm-up, run-time bounds, block
    time and ``clock``, which replaces time.perf_counter (tests). ``judge`` (a :class:`Judge`
    or a mapping) is the decision: minimum effect, noise level, interval floor, rounds before
    a verdict, confidence, resamples and seed. The former flat keywords are refused with
    their new spelling, and so are the options a comparison does not use.
    """
    rule = Judge.from_mapping(judge)
    timing = _comparison_timing(options, rule)
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
        return _compare_workloads(pair, timing, rule, memory=memory, flops=flops, device=device)
    if callable(baseline) or callable(candidate):
        raise TypeError(
            "compare_benchmarks needs two workloads or two saved BenchmarkReports, got a mix "
            f"({type(baseline).__name__} and {type(candidate).__name__})"
        )
    comparison = _compare_saved(
        _as_benchmark(baseline, "baseline"), _as_benchmark(candidate, "candidate"), rule, names
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


# LatencyOptions fields a comparison takes from the judge (so the rounds it samples and the
# rounds it judges, the noise it warns of per side and overall, are one value each) ...
_JUDGED = {"min_blocks": "min_blocks", "noise_threshold": "max_noise"}
# ... and measure_latency's own stop rule, which an interleaved comparison never applies
_UNUSED = ("target_relative_iqr", "target_median_precision")


def _comparison_timing(
    options: LatencyOptions | Mapping[str, Any] | None, judge: Judge
) -> LatencyOptions:
    """The timing of a comparison: ``options`` over COMPARE_DEFAULTS (a mapping) or as given
    (a LatencyOptions), with the rounds and the noise level the judge decides. A setting the
    judge owns, or one a comparison does not use, is refused when it was set (a mapping key,
    or an object field moved from its default): silently dropping it would be a guess."""
    if isinstance(options, LatencyOptions):
        given = [
            n for n in (*_JUDGED, *_UNUSED) if getattr(options, n) != getattr(MEASURE_DEFAULTS, n)
        ]
    elif isinstance(options, Mapping):
        given = [n for n in (*_JUDGED, *_UNUSED) if n in options]
    else:
        given = []
    for name in given:
        if name in _JUDGED:
            raise TypeError(
                f"compare_benchmarks(options={{{name!r}: ...}}): in a comparison the judge "
                f"decides this; pass judge={{{_JUDGED[name]!r}: ...}} instead"
            )
        raise TypeError(
            f"compare_benchmarks(options={{{name!r}: ...}}) is not used by a comparison "
            "(it is measure_latency's stop rule; a comparison stops when the interval is "
            "narrower than judge min_effect, or at options max_run_time): drop it"
        )
    timing = LatencyOptions.from_mapping(options, base=COMPARE_DEFAULTS)
    return replace(timing, min_blocks=judge.min_blocks, noise_threshold=judge.max_noise)


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


def _time_pair(
    pair: _Pair, options: LatencyOptions, judge: Judge, device: Any, sync: Callable[[], None]
) -> _Timed:
    """First calls, the owner's check on their outputs, then interleaved adaptive rounds."""
    import time

    clock = options.clock if options.clock is not None else time.perf_counter
    monitor = HostMonitor() if options.clock is None else None
    base_out, base_first = first_call(pair.baseline, sync, clock)
    cand_out, cand_first = first_call(pair.candidate, sync, clock)
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
        sampled = SampledBlocks(
            blocks,
            timed.first_calls[index],
            calls_per_block=per_block,
            warmup_calls=run.warmup_calls,
            total_time_s=run.total_time_s,
            stop_reason=run.stop_reason,
            noise=classify_blocks(blocks, trace),
        )
        section, side_diagnostics = latency_section(
            sampled,
            options,
            work_units=pair.work_units,
            unit=pair.unit,
            synchronized=is_synchronized(device),
            settings=settings,
        )
        if timed.host is not None:
            side_diagnostics += host_diagnostics(timed.host, sampled.noise, "latency.warmed")
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
        # what the comparison used: measure_latency's stop rule is never applied here
        **{k: v for k, v in options.settings().items() if k not in _UNUSED},
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
