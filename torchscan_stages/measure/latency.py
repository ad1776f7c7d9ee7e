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
   ``target_relative_iqr``, or at ``max_run_time``. A sample still too noisy after
   ``2 * min_blocks`` blocks is discarded and restarted with blocks of twice as many calls
   (block averages spread less), while the time left fits ``min_blocks`` such blocks.

The primitives :func:`time_block` and :func:`calibrate_block` are public so that a
comparison can interleave blocks of two workloads with exactly the same timing code.
Nothing here changes threads, grad mode or any other global state.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
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
from ..report import BenchmarkReport, Diagnostic, LatencySection, LatencyStats, MetricResult
from ..workload_type import Workload
from .stats import relative_iqr, summarize

Clock = Callable[[], float]
Progress = Callable[[str], None]

DEFAULT_WARMUP_S = 0.02
DEFAULT_MIN_RUN_TIME_S = 0.05
DEFAULT_MAX_RUN_TIME_S = 5.0
DEFAULT_MIN_BLOCK_TIME_S = 0.001
DEFAULT_MIN_BLOCKS = 7
DEFAULT_TARGET_RELATIVE_IQR = 0.02
DEFAULT_NOISE_THRESHOLD = 0.05
MAX_CALLS_PER_BLOCK = 10_000_000


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


def time_block(workload: Workload, calls: int, sync: Callable[[], None], clock: Clock) -> float:
    """Run ``workload`` ``calls`` times between two synchronised clock reads; seconds per call."""
    if calls < 1:
        raise ValueError(f"calls must be >= 1, got {calls}")
    sync()
    start = clock()
    for _ in range(calls):
        workload()
    sync()
    return (clock() - start) / calls


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
    min_block_time: float = DEFAULT_MIN_BLOCK_TIME_S,
    resolution: float | None = None,
    overhead: float | None = None,
) -> BlockCalibration:
    """Find calls per block: one block lasts >= max(min_block_time, 1000 x resolution,
    1000 x overhead), where ``overhead`` is the cost of an empty timed region.

    Grows the block from one call, jumping towards the estimate from the last block (at most
    x10 per step, at least x2) so calibration costs a few target-length blocks.
    """
    target = max(min_block_time, 1000 * (resolution or 0.0), 1000 * (overhead or 0.0))
    calls = 1
    made = 0
    while True:
        per_call = time_block(workload, calls, sync, clock)
        made += calls
        block = per_call * calls
        if block >= target or calls >= MAX_CALLS_PER_BLOCK:
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


def validate_latency_options(
    *,
    work_units: float,
    unit: str,
    warmup: float,
    min_run_time: float,
    max_run_time: float,
    min_block_time: float,
    min_blocks: int,
    target_relative_iqr: float,
    noise_threshold: float,
    clock: Clock | None,
) -> None:
    if isinstance(work_units, bool) or not isinstance(work_units, (int, float)):
        raise TypeError(f"work_units must be a number, got {type(work_units).__name__}")
    if not math.isfinite(work_units) or work_units <= 0:
        raise ValueError(f"work_units must be a finite number > 0, got {work_units!r}")
    if not isinstance(unit, str) or not unit.strip():
        raise ValueError(f"unit must be a non-empty string such as 'samples', got {unit!r}")
    checks = {
        "warmup": (warmup, 0.0),
        "min_run_time": (min_run_time, 1e-9),
        "max_run_time": (max_run_time, 1e-9),
        "min_block_time": (min_block_time, 0.0),
        "target_relative_iqr": (target_relative_iqr, 0.0),
        "noise_threshold": (noise_threshold, 0.0),
    }
    for name, (value, lowest) in checks.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{name} must be a number of seconds/ratio, got {type(value).__name__}")
        if not math.isfinite(value) or value < lowest:
            raise ValueError(f"{name} must be finite and >= {lowest}, got {value!r}")
    if max_run_time < min_run_time:
        raise ValueError(f"max_run_time ({max_run_time}) must be >= min_run_time ({min_run_time})")
    if isinstance(min_blocks, bool) or not isinstance(min_blocks, int) or min_blocks < 1:
        raise ValueError(f"min_blocks must be an int >= 1, got {min_blocks!r}")
    if clock is not None and not callable(clock):
        raise TypeError(f"clock must be a zero-argument callable returning seconds, got {clock!r}")


def run_latency(
    workload: Workload,
    *,
    work_units: float = 1,
    unit: str = "calls",
    warmup: float = DEFAULT_WARMUP_S,
    min_run_time: float = DEFAULT_MIN_RUN_TIME_S,
    max_run_time: float = DEFAULT_MAX_RUN_TIME_S,
    min_block_time: float = DEFAULT_MIN_BLOCK_TIME_S,
    min_blocks: int = DEFAULT_MIN_BLOCKS,
    target_relative_iqr: float = DEFAULT_TARGET_RELATIVE_IQR,
    noise_threshold: float = DEFAULT_NOISE_THRESHOLD,
    device: torch.device,
    clock: Clock | None = None,
    progress: Progress | None = None,
) -> LatencyRun:
    """The latency pass itself (validated arguments, resolved device); see measure_latency."""
    read = clock if clock is not None else time.perf_counter
    sync = make_synchronize(device)
    resolution = timer_resolution(read)
    overhead = measure_overhead(sync, read)
    begin = read()

    sync()
    t0 = read()
    workload()
    sync()
    first_call = read() - t0
    calls = 1

    warmup_calls = 0
    warm_start = read()
    while warmup > 0 and (warmup_calls == 0 or read() - warm_start < warmup):
        workload()
        warmup_calls += 1
    sync()
    calls += warmup_calls

    calibration = calibrate_block(
        workload,
        sync,
        read,
        min_block_time=min_block_time,
        resolution=resolution,
        overhead=overhead,
    )
    calls += calibration.calls_made
    per_block = calibration.calls_per_block

    blocks: list[float] = []
    run_start = stage_start = read()
    stop_reason = "max_run_time"
    next_note = run_start + 1.0
    escalations = 0
    discarded_blocks = 0
    while True:
        blocks.append(time_block(workload, per_block, sync, read))
        calls += per_block
        now = read()
        elapsed = now - run_start
        if progress is not None and now >= next_note:
            progress(f"latency: {len(blocks)} blocks of {per_block} calls, {elapsed:.1f} s")
            next_note = now + 1.0
        if elapsed >= max_run_time:
            break
        if now - stage_start < min_run_time or len(blocks) < min_blocks:
            continue
        rel = relative_iqr(blocks)
        if rel <= target_relative_iqr:
            stop_reason = "target_relative_iqr"
            break
        # Still too noisy after twice the minimum: averaging more calls per block narrows the
        # spread of block averages. Start a fresh sample with doubled blocks when the time left
        # still fits min_blocks of them; mixed block sizes are never pooled.
        doubled_block_s = 2 * per_block * summarize(blocks).median
        if (
            len(blocks) >= 2 * min_blocks
            and per_block * 2 <= MAX_CALLS_PER_BLOCK
            and max_run_time - elapsed >= min_blocks * doubled_block_s
        ):
            per_block *= 2
            escalations += 1
            discarded_blocks += len(blocks)
            blocks = []
            stage_start = now
    total = read() - begin

    section, diagnostics = latency_section(
        blocks,
        first_call,
        work_units=work_units,
        unit=unit,
        synchronized=is_synchronized(device),
        calls_per_block=per_block,
        warmup_calls=warmup_calls,
        total_time_s=total,
        noise_threshold=noise_threshold,
        timer="injected clock" if clock is not None else "time.perf_counter",
        calibration_calls=calibration.calls_made,
        stop_reason=stop_reason,
        settings={
            "warmup_s": warmup,
            "min_run_time_s": min_run_time,
            "max_run_time_s": max_run_time,
            "min_block_time_s": min_block_time,
            "target_block_time_s": calibration.target_block_time_s,
            "min_blocks": min_blocks,
            "target_relative_iqr": target_relative_iqr,
            "noise_threshold": noise_threshold,
            "timer_resolution_s": resolution,
            "timed_region_overhead_s": overhead,
            "block_escalations": escalations,
            "discarded_blocks": discarded_blocks,
            "work_units": work_units,
            "unit": unit,
        },
    )
    warning = unsynchronized_accelerator(device, "latency.warmed")
    if warning is not None:
        diagnostics.append(warning)
    return LatencyRun(section=section, diagnostics=diagnostics, calls=calls)


def latency_section(
    blocks: list[float],
    first_call: float,
    *,
    work_units: float,
    unit: str,
    synchronized: bool,
    calls_per_block: int,
    warmup_calls: int,
    total_time_s: float,
    noise_threshold: float,
    timer: str,
    settings: dict[str, Any],
    calibration_calls: int = 0,
    stop_reason: str | None = None,
) -> tuple[LatencySection, list[Diagnostic]]:
    """The latency section (and its noise diagnostics) from raw per-call block averages.

    Shared by measure_latency and the interleaved comparison so both report latency alike.
    """
    stats = summarize(blocks)
    diagnostics: list[Diagnostic] = []
    rel = stats.relative_iqr
    if rel > noise_threshold:
        diagnostics.append(
            Diagnostic(
                code="latency_noisy",
                severity="warning",
                metric="latency.warmed",
                message=(
                    f"IQR/median of warmed block averages is {rel:.1%}, above the noise "
                    f"threshold {noise_threshold:.1%} ({stats.count} blocks of "
                    f"{calls_per_block} calls); other load, frequency scaling or a variable "
                    "workload may dominate"
                ),
            )
        )
    method = "wall_clock_synchronized" if synchronized else "wall_clock"
    scope = "warmed_block_average"
    throughput_method = "work_units_per_median_latency"
    if stats.median > 0:
        throughput = MetricResult.complete(
            work_units / stats.median, unit=f"{unit}/s", scope=scope, method=throughput_method
        )
    else:
        throughput = MetricResult.unavailable(
            unit=f"{unit}/s", scope=scope, method=throughput_method
        )
        diagnostics.append(
            Diagnostic(
                code="latency_below_resolution",
                metric="latency.throughput",
                message="the warmed median is 0 s (below the clock's resolution); "
                "throughput cannot be derived",
            )
        )
    section = LatencySection(
        first_call=MetricResult.complete(first_call, unit="s", scope="first_call", method=method),
        warmed=MetricResult.complete(stats.median, unit="s", scope=scope, method=method),
        throughput=throughput,
        stats=LatencyStats(
            median=stats.median,
            q1=stats.q1,
            q3=stats.q3,
            iqr=stats.iqr,
            min=stats.min,
            max=stats.max,
            mean=stats.mean,
            blocks=stats.count,
            calls_per_block=calls_per_block,
            warmup_calls=warmup_calls,
            total_time_s=total_time_s,
            relative_iqr=rel if math.isfinite(rel) else None,
            calibration_calls=calibration_calls,
            stop_reason=stop_reason,
        ),
        block_times_s=blocks,
        timer=timer,
        synchronized=synchronized,
        settings=settings,
    )
    return section, diagnostics


def measure_latency(
    workload: Workload,
    *,
    work_units: float = 1,
    unit: str = "calls",
    warmup: float = DEFAULT_WARMUP_S,
    min_run_time: float = DEFAULT_MIN_RUN_TIME_S,
    device: str | torch.device | None = None,
    clock: Clock | None = None,
    max_run_time: float = DEFAULT_MAX_RUN_TIME_S,
    min_block_time: float = DEFAULT_MIN_BLOCK_TIME_S,
    min_blocks: int = DEFAULT_MIN_BLOCKS,
    target_relative_iqr: float = DEFAULT_TARGET_RELATIVE_IQR,
    noise_threshold: float = DEFAULT_NOISE_THRESHOLD,
    name: str | None = None,
) -> BenchmarkReport:
    """First-call and warmed latency of ``workload`` with throughput in ``unit/s``.

    ``warmup`` is in seconds of calls after the first call; ``min_run_time`` and
    ``max_run_time`` bound the measured blocks in seconds. ``work_units`` is the work one
    call completes (e.g. 32 samples): throughput = work_units / median warmed latency, not a
    served-queue throughput. ``device`` is the device whose queued work is synchronised
    inside every timed region (None = CPU). ``clock`` replaces time.perf_counter (tests).
    """
    check_workload(workload)
    validate_latency_options(
        work_units=work_units,
        unit=unit,
        warmup=warmup,
        min_run_time=min_run_time,
        max_run_time=max_run_time,
        min_block_time=min_block_time,
        min_blocks=min_blocks,
        target_relative_iqr=target_relative_iqr,
        noise_threshold=noise_threshold,
        clock=clock,
    )
    resolved = resolve_device(device)
    run = run_latency(
        workload,
        work_units=work_units,
        unit=unit,
        warmup=warmup,
        min_run_time=min_run_time,
        max_run_time=max_run_time,
        min_block_time=min_block_time,
        min_blocks=min_blocks,
        target_relative_iqr=target_relative_iqr,
        noise_threshold=noise_threshold,
        device=resolved,
        clock=clock,
    )
    return BenchmarkReport(
        provenance=build_provenance(),
        name=name,
        work_units=work_units,
        unit=unit,
        execution=execution_record(resolved, {"latency": run.calls}),
        latency=run.section,
        diagnostics=run.diagnostics,
    )
