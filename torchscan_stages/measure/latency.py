"""Clean wall-clock latency of a zero-argument workload: first call, then warmed blocks.

Method (torch.utils.benchmark's blocked idea, with an adaptive stop):

1. First call: one synchronised call, timed alone; it includes all lazy work (allocator
   growth, kernel selection, caches) and is reported separately (scope ``first_call``).
2. Warm-up: calls for ``warmup`` seconds (not recorded).
3. Calibration: calls per block grow until one block lasts at least ``min_block_time``,
   1000 timer resolutions and 1000 times the measured cost of an empty timed region (clock
   reads plus synchronisation), so that overhead stays below 0.1% of a block.
4. Blocks: each block is ``sync; t0; calls x workload(); sync; t1`` and records
   ``(t1 - t0) / calls`` (a per-call block average). Blocks run until ``min_run_time`` has
   passed and at least ``min_blocks`` exist, then stop as soon as IQR/median is at most
   ``target_relative_iqr`` and the median's 95% interval is within
   ``target_median_precision``, or at ``max_run_time``. A sample still too noisy after
   ``2 * min_blocks`` blocks is discarded and restarted with blocks of twice as many calls
   (block averages spread less), while the time left fits ``min_blocks`` such blocks.

Every block is probed outside its timed region (process CPU time and involuntary context
switches, via time.process_time and getrusage) so that blocks the host took the CPU from are
classified in the report (``latency.noise``; they are kept, never deleted), and the host's
load at start and end goes into the report's provenance with a ``loaded_host`` warning when
other processes competed for the cores. A wall-clock backstop (time.monotonic, independent
of the clock in use) ends a timing whose clock does not advance. Settings live in one
frozen :class:`LatencyOptions`.

The primitives :func:`time_block` and :func:`calibrate_block` are public so that a
comparison can interleave blocks of two workloads with exactly the same timing code.
Nothing here changes threads, grad mode or any other global state.
"""

from __future__ import annotations

import math
import numbers
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from ..devices import (
    check_workload,
    execution_record,
    is_synchronized,
    make_synchronize,
    resolve_device,
    unsynchronized_accelerator,
)
from ..provenance import build_provenance
from ..report import (
    BenchmarkReport,
    Diagnostic,
    HostState,
    LatencySection,
    MetricResult,
)
from ..stats import median_precision, relative_iqr, summarize
from ..workloads import Workload, eager_compiled_code, lazy_output_diagnostic
from .block_summary import SampledBlocks, latency_section
from .host import BlockTrace, HostMonitor, classify_blocks, host_diagnostics, process_probe
from .latency_options import (
    MAX_CALLS_PER_BLOCK,
    MEASURE_DEFAULTS,
    Clock,
    LatencyOptions,
    Probe,
    moved_into_options,
    validate_work,
)
from .work_probe import WorkProbe

Progress = Callable[[str], None]

__all__ = ["measure_latency"]


def timer_resolution(clock: Clock, *, max_reads: int = 100_000) -> float | None:
    """Smallest observed positive step of ``clock`` (seconds), or None if it never moved.

    Bounded: an injected test clock that only advances when a workload runs returns None.
    """
    steps: list[float] = []
    previous = clock()
    for _ in range(max_reads):
        now = clock()
        if now != previous:
            steps.append(now - previous)
            if len(steps) >= 5:
                break
        previous = now
    positive = [step for step in steps if step > 0]
    return min(positive) if positive else None


def _check_clock(clock: Clock) -> None:
    """One read of an injected clock before any timing: seconds as a real number, or a
    one-line TypeError (not an arithmetic error from deep inside the first timed block)."""
    value = clock()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"clock must return seconds as a number, such as time.perf_counter(); clock() "
            f"returned {value!r:.60} ({type(value).__name__})"
        )
    if not math.isfinite(value):
        raise ValueError(f"clock must return finite seconds; clock() returned {value!r}")


def time_block(workload: Workload, calls: int, sync: Callable[[], None], clock: Clock) -> float:
    """Run ``workload`` ``calls`` times between two synchronised clock reads; seconds per call."""
    if calls < 1:
        raise ValueError(f"calls must be >= 1, got {calls}")
    sync()
    start = clock()
    for _ in range(calls):
        workload()
    sync()
    elapsed = clock() - start
    if not math.isfinite(elapsed) or elapsed < 0:
        raise ValueError(
            f"the clock gave a block time of {elapsed!r} s (start {start!r}); a timing clock "
            "must return finite, non-decreasing seconds"
        )
    return elapsed / calls


def measure_overhead(sync: Callable[[], None], clock: Clock, *, repeats: int = 11) -> float:
    """Median cost of an empty timed region (sync, clock, sync, clock), in seconds."""
    samples = sorted(time_block(_nothing, 1, sync, clock) for _ in range(repeats))
    return samples[len(samples) // 2]


def _nothing() -> None:
    return None


@dataclass(frozen=True)
class BlockCalibration:
    """Result of :func:`calibrate_block`: the block size and the calls spent finding it."""

    calls_per_block: int
    calls_made: int
    block_time_s: float
    target_block_time_s: float


def calibrate_block(
    workload: Workload,
    sync: Callable[[], None],
    clock: Clock,
    *,
    min_block_time: float = MEASURE_DEFAULTS.min_block_time,
    resolution: float | None = None,
    overhead: float | None = None,
    deadline: float | None = None,
) -> BlockCalibration:
    """Find calls per block: one block lasts >= max(min_block_time, 1000 x resolution,
    1000 x overhead), where ``overhead`` is the cost of an empty timed region.

    Grows the block from one call, jumping towards the estimate from the last block (at most
    x10 per step, at least x2) so calibration costs a few target-length blocks. ``deadline``
    (time.monotonic) ends the search with the block reached so far (a stalled clock).
    """
    target = max(min_block_time, 1000 * (resolution or 0.0), 1000 * (overhead or 0.0))
    calls = 1
    made = 0
    while True:
        per_call = time_block(workload, calls, sync, clock)
        made += calls
        block = per_call * calls
        late = deadline is not None and time.monotonic() >= deadline
        if block >= target or calls >= MAX_CALLS_PER_BLOCK or late:
            return BlockCalibration(calls, made, block, target)
        if per_call > 0:
            wanted = math.ceil(1.1 * target / per_call)
            calls = min(max(calls * 2, wanted), calls * 10)
        else:
            calls *= 10
        calls = min(calls, MAX_CALLS_PER_BLOCK)


@dataclass
class LatencyRun:
    """Everything one latency pass produced, before it is wrapped in a report."""

    section: LatencySection
    diagnostics: list[Diagnostic] = field(default_factory=list)
    calls: int = 0
    host: HostState | None = None


@dataclass
class _Blocks:
    """The warmed sample as it grows: block averages, their probes, the stop reason."""

    per_block: int
    values: list[float] = field(default_factory=list)
    trace: BlockTrace = field(default_factory=BlockTrace)
    calls: int = 0
    stop_reason: str = "max_run_time"
    escalations: int = 0
    discarded: int = 0


def probe_for(options: LatencyOptions) -> Probe | None:
    """The per-block probe: the injected one, else the process's own unless the clock is
    simulated."""
    if options.probe is not None:
        return options.probe
    return process_probe() if options.clock is None else None


def probed_block(
    workload: Workload,
    calls: int,
    sync: Callable[[], None],
    clock: Clock,
    probe: Probe | None,
    trace: BlockTrace,
) -> float:
    """:func:`time_block` with a probe read on each side, outside the timed region."""
    before = probe() if probe is not None else None
    per_call = time_block(workload, calls, sync, clock)
    if probe is not None and before is not None:
        trace.add(before, probe(), per_call * calls)
    return per_call


def _warm_up(
    workload: Workload,
    sync: Callable[[], None],
    read: Clock,
    warmup: float,
    deadline: float,
    probe: WorkProbe | None = None,
) -> int:
    """Calls for ``warmup`` seconds (at least one when warmup > 0); returns the count.

    The first warm-up call runs under ``probe`` (untimed, after the first call), which tells
    a batch of 0 from real work without touching any timed region."""
    calls = 0
    start = read()
    while warmup > 0 and (calls == 0 or read() - start < warmup):
        if calls == 0 and probe is not None:
            # a dispatch mode around compiled code: ignore compile directives for this one
            # call, or Dynamo may leave the compiled model running eagerly afterwards
            with eager_compiled_code("the work probe"), probe:
                workload()
        else:
            workload()
        calls += 1
        if time.monotonic() >= deadline:
            break
    sync()
    return calls


def _sample_blocks(
    workload: Workload,
    options: LatencyOptions,
    sampling: _Blocks,
    timing: tuple[Callable[[], None], Clock, Probe | None],
    deadline: float,
    progress: Progress | None,
) -> None:
    """Blocks until min_run_time and min_blocks, then until IQR/median <= target or budget.

    Still too noisy after twice the minimum: averaging more calls per block narrows the
    spread of block averages, so a fresh sample starts with doubled blocks when the time
    left fits min_blocks of them; mixed block sizes are never pooled.
    """
    sync, read, probe = timing
    run_start = stage_start = read()
    next_note = run_start + 1.0
    while True:
        per_block = sampling.per_block
        sampling.values.append(probed_block(workload, per_block, sync, read, probe, sampling.trace))
        sampling.calls += per_block
        now = read()
        elapsed = now - run_start
        if progress is not None and now >= next_note:
            progress(
                f"latency: {len(sampling.values)} blocks of {per_block} calls, {elapsed:.1f} s"
            )
            next_note = now + 1.0
        if elapsed >= options.max_run_time:
            return
        if time.monotonic() >= deadline:
            sampling.stop_reason = "wall_clock_backstop"
            return
        if now - stage_start < options.min_run_time or len(sampling.values) < options.min_blocks:
            continue
        if relative_iqr(sampling.values) <= options.target_relative_iqr:
            if median_precision(sampling.values) <= options.target_median_precision:
                sampling.stop_reason = "target_relative_iqr"
                return
            continue  # stable blocks: more of them pin the median down
        doubled_block_s = 2 * per_block * summarize(sampling.values).median
        if (
            len(sampling.values) >= 2 * options.min_blocks
            and per_block * 2 <= MAX_CALLS_PER_BLOCK
            and options.max_run_time - elapsed >= options.min_blocks * doubled_block_s
        ):
            sampling.per_block *= 2
            sampling.escalations += 1
            sampling.discarded += len(sampling.values)
            sampling.values = []
            sampling.trace.clear()
            stage_start = now


def first_call(workload: Workload, sync: Callable[[], None], clock: Clock) -> tuple[Any, float]:
    """One synchronised call timed alone (all lazy work included): (its output, seconds)."""
    sync()
    start = clock()
    output = workload()
    sync()
    return output, clock() - start


def _run_settings(
    options: LatencyOptions,
    calibration: BlockCalibration,
    sampling: _Blocks,
    clock: tuple[float | None, float],
) -> dict[str, Any]:
    """What a latency section records of how it was timed: the options, the calibrated
    block, the clock's (resolution, overhead of an empty timed region) and the restarts."""
    return {
        **options.settings(),
        "target_block_time_s": calibration.target_block_time_s,
        "timer_resolution_s": clock[0],
        "timed_region_overhead_s": clock[1],
        "block_escalations": sampling.escalations,
        "discarded_blocks": sampling.discarded,
    }


def run_latency(
    workload: Workload,
    options: LatencyOptions = MEASURE_DEFAULTS,
    *,
    work_units: float = 1,
    unit: str = "calls",
    device: torch.device,
    progress: Progress | None = None,
) -> LatencyRun:
    """The latency pass itself (validated options, resolved device); see measure_latency."""
    read = options.clock if options.clock is not None else time.perf_counter
    if options.clock is not None:
        _check_clock(read)
    deadline = time.monotonic() + options.backstop_s
    monitor = HostMonitor() if options.clock is None else None
    sync = make_synchronize(device)
    resolution = timer_resolution(read)
    overhead = measure_overhead(sync, read)
    begin = read()
    output, first = first_call(workload, sync, read)
    lazy = lazy_output_diagnostic(output, "latency.throughput")
    del output
    probe = WorkProbe()
    warmup_calls = _warm_up(workload, sync, read, options.warmup, deadline, probe)
    calibration = calibrate_block(
        workload,
        sync,
        read,
        min_block_time=options.min_block_time,
        resolution=resolution,
        overhead=overhead,
        deadline=deadline,
    )
    sampling = _Blocks(per_block=calibration.calls_per_block)
    _sample_blocks(
        workload, options, sampling, (sync, read, probe_for(options)), deadline, progress
    )
    settings = {
        **_run_settings(options, calibration, sampling, (resolution, overhead)),
        "work_units": work_units,
        "unit": unit,
    }
    noise = classify_blocks(sampling.values, sampling.trace)
    sampled = SampledBlocks(
        sampling.values,
        first,
        calls_per_block=sampling.per_block,
        warmup_calls=warmup_calls,
        total_time_s=read() - begin,
        calibration_calls=calibration.calls_made,
        stop_reason=sampling.stop_reason,
        noise=noise,
    )
    section, diagnostics = latency_section(
        sampled,
        options,
        work_units=work_units,
        unit=unit,
        synchronized=is_synchronized(device),
        settings=settings,
    )
    # an injected clock simulates the cost: its workload need dispatch no operator
    work = probe.diagnostic("latency.throughput")
    if options.clock is not None and work is not None and work.code == "no_operators":
        work = None
    section = _mark_no_work(section, diagnostics, lazy, work)
    section = _mark_stuck_clock(section, diagnostics)
    host = monitor.finish() if monitor is not None else None
    if host is not None:
        diagnostics += host_diagnostics(host, noise, "latency.warmed")
    warning = unsynchronized_accelerator(device, "latency.warmed")
    if warning is not None:
        diagnostics.append(warning)
    calls = 1 + warmup_calls + calibration.calls_made + sampling.calls
    return LatencyRun(section=section, diagnostics=diagnostics, calls=calls, host=host)


def _mark_no_work(
    section: LatencySection,
    diagnostics: list[Diagnostic],
    lazy: Diagnostic | None,
    empty: Diagnostic | None,
) -> LatencySection:
    """No throughput for work that did not run (lazy) or was empty (a batch of 0): the
    ``work_units`` it would divide were never done. A lazy call's times are lower bounds."""
    if lazy is None and empty is None:
        return section
    throughput = section.throughput
    update: dict[str, MetricResult] = {
        "throughput": MetricResult.unavailable(
            unit=throughput.unit, scope=throughput.scope, method=throughput.method
        )
    }
    if lazy is not None:
        for key in ("first_call", "warmed"):
            result: MetricResult = getattr(section, key)
            update[key] = (
                MetricResult.partial(
                    result.known_value, unit=result.unit, scope=result.scope, method=result.method
                )
                if result.known_value
                else MetricResult.unavailable(
                    unit=result.unit, scope=result.scope, method=result.method
                )
            )
    diagnostics += [note for note in (lazy, empty) if note is not None]
    return section.model_copy(update=update)


def _mark_stuck_clock(section: LatencySection, diagnostics: list[Diagnostic]) -> LatencySection:
    """No times from a clock that never advanced: 0 s for every call is no measurement.

    A clock frozen for the whole run (``clock=lambda: 0.0``, a broken timer) reads 0 for the
    first call and every block; those zeros are unavailable, not a complete 0.0 s."""
    stats = section.stats
    if stats is None or stats.total_time_s > 0 or section.first_call.value:
        return section
    diagnostics.append(
        Diagnostic(
            code="clock_not_advancing",
            severity="error",
            metric="latency.warmed",
            count=stats.blocks,
            message=f"the timing clock read the same time for the whole run ({stats.blocks} "
            "block(s) and the first call all took 0 s): no duration was measured; pass a "
            "clock that advances (time.perf_counter, the default)",
        )
    )
    update = {
        key: MetricResult.unavailable(unit=result.unit, scope=result.scope, method=result.method)
        for key in ("first_call", "warmed", "throughput")
        for result in [getattr(section, key)]
    }
    return section.model_copy(update=update)


@moved_into_options(options=LatencyOptions)
def measure_latency(
    workload: Workload,
    *,
    work_units: float = 1,
    unit: str = "calls",
    device: str | torch.device | None = None,
    name: str | None = None,
    options: LatencyOptions | Mapping[str, Any] | None = None,
) -> BenchmarkReport:
    """First-call and warmed latency of ``workload`` with throughput in ``unit/s``.

    ``work_units`` is the work one call completes (e.g. 32 samples): throughput =
    work_units / median warmed latency, not a served-queue throughput. ``device`` is the
    device whose queued work is synchronised inside every timed region (None = CPU).
    ``options`` is every timing setting in one :class:`LatencyOptions` (or a mapping of its
    field names): warm-up and run-time bounds in seconds, block counts, noise thresholds, and
    ``clock`` replacing time.perf_counter (tests). It is the one way in: the former flat
    keywords (``warmup=``, ``min_run_time=``, ``clock=``...) are refused with the new spelling.
    """
    check_workload(workload)
    validate_work(work_units, unit)
    timing = LatencyOptions.from_mapping(options, base=MEASURE_DEFAULTS)
    resolved = resolve_device(device)
    run = run_latency(workload, timing, work_units=work_units, unit=unit, device=resolved)
    return BenchmarkReport(
        provenance=build_provenance(host=run.host),
        name=name,
        work_units=work_units,
        unit=unit,
        execution=execution_record(resolved, {"latency": run.calls}),
        latency=run.section,
        diagnostics=run.diagnostics,
    )
