"""The latency section of a report from raw per-call block averages.

Median, quartiles, throughput and the spread warnings, shared by measure_latency and
compare_benchmarks so both sides of a comparison are reported exactly as a single
measurement is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..report import Diagnostic, LatencyNoise, LatencySection, LatencyStats, MetricResult
from ..stats import summarize
from .latency_options import LatencyOptions


@dataclass(frozen=True)
class SampledBlocks:
    """What one side's timing produced: raw per-call block averages and how they were got."""

    blocks: list[float]
    first_call: float
    calls_per_block: int
    warmup_calls: int
    total_time_s: float
    calibration_calls: int = 0
    stop_reason: str | None = None
    noise: LatencyNoise | None = None


def latency_section(
    sampled: SampledBlocks,
    options: LatencyOptions,
    *,
    work_units: float,
    unit: str,
    synchronized: bool,
    settings: dict[str, Any],
) -> tuple[LatencySection, list[Diagnostic]]:
    """The latency section (and its diagnostics) from raw per-call block averages.

    Shared by measure_latency and the interleaved comparison so both report latency alike;
    ``options`` gives the noise threshold, the timer's name and ``min_blocks``. Fewer than
    ``min_blocks`` blocks keep their median (it was measured) but get a ``too_few_blocks``
    warning and no relative IQR: one block has an IQR of 0 that says nothing about stability.
    """
    blocks, min_blocks = sampled.blocks, options.min_blocks
    stats = summarize(blocks)
    diagnostics = _spread_diagnostics(
        stats.relative_iqr, stats.count, options.noise_threshold, min_blocks
    )
    if sampled.stop_reason == "wall_clock_backstop":
        diagnostics.append(
            Diagnostic(
                code="timing_backstop",
                severity="warning",
                metric="latency.warmed",
                message="the timing clock did not reach max_run_time within the wall-clock "
                "backstop (time.monotonic); the clock may not be advancing",
            )
        )
    method = "wall_clock_synchronized" if synchronized else "wall_clock"
    throughput, below = _throughput(stats.median, work_units, unit)
    diagnostics += below
    scope = "warmed_block_average"
    judged = stats.count >= min_blocks and math.isfinite(stats.relative_iqr)
    section = LatencySection(
        first_call=MetricResult.complete(
            sampled.first_call, unit="s", scope="first_call", method=method
        ),
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
            calls_per_block=sampled.calls_per_block,
            warmup_calls=sampled.warmup_calls,
            total_time_s=sampled.total_time_s,
            relative_iqr=stats.relative_iqr if judged else None,
            calibration_calls=sampled.calibration_calls,
            stop_reason=sampled.stop_reason,
        ),
        block_times_s=blocks,
        timer=options.timer,
        synchronized=synchronized,
        settings=settings,
        noise=sampled.noise,
    )
    return section, diagnostics


def _spread_diagnostics(
    rel: float, count: int, noise_threshold: float, min_blocks: int
) -> list[Diagnostic]:
    if count < min_blocks:
        return [
            Diagnostic(
                code="too_few_blocks",
                severity="warning",
                metric="latency.warmed",
                message=(
                    f"only {count} warmed block(s) fit in max_run_time, fewer than min_blocks "
                    f"{min_blocks}: the median is measured but its spread cannot be judged; "
                    "raise max_run_time for a stable figure"
                ),
            )
        ]
    if rel > noise_threshold:
        return [
            Diagnostic(
                code="latency_noisy",
                severity="warning",
                metric="latency.warmed",
                message=(
                    f"IQR/median of warmed block averages is {rel:.1%}, above the noise "
                    f"threshold {noise_threshold:.1%} ({count} blocks); other load, frequency "
                    "scaling or a variable workload may dominate"
                ),
            )
        ]
    return []


def _throughput(
    median: float, work_units: float, unit: str
) -> tuple[MetricResult, list[Diagnostic]]:
    scope, method = "warmed_block_average", "work_units_per_median_latency"
    if median > 0:
        value = MetricResult.complete(
            work_units / median, unit=f"{unit}/s", scope=scope, method=method
        )
        return value, []
    diagnostic = Diagnostic(
        code="latency_below_resolution",
        metric="latency.throughput",
        message="the warmed median is 0 s (below the clock's resolution); "
        "throughput cannot be derived",
    )
    return MetricResult.unavailable(unit=f"{unit}/s", scope=scope, method=method), [diagnostic]
