"""Interleaved timing of two workloads and a bootstrap interval for their latency ratio.

Both sides are timed by the same primitives as measure_latency (time_block and
calibrate_block); rounds alternate the order (AB, BA, AB, ...) so slow drift of the machine
(frequency, other load) hits both sides alike. Paired rounds are resampled together, which
keeps that shared drift out of the interval.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..measure.latency import Clock, calibrate_block, time_block, timer_resolution
from ..measure.stats import quantile
from ..workload_type import Workload


@dataclass(frozen=True)
class InterleavedRun:
    """Per-call block averages of both sides, in rounds (index i of each is one round)."""

    baseline_blocks: list[float]
    candidate_blocks: list[float]
    baseline_calls_per_block: int
    candidate_calls_per_block: int
    warmup_calls: int
    calls_made: int
    total_time_s: float


def run_interleaved(
    baseline: Workload,
    candidate: Workload,
    *,
    sync: Callable[[], None],
    warmup: float,
    min_run_time: float,
    max_run_time: float,
    min_blocks: int,
    min_block_time: float,
    clock: Clock | None = None,
) -> InterleavedRun:
    """Warm both sides up alternately, calibrate each, then time alternating block rounds.

    Stops once ``min_run_time`` has passed and ``min_blocks`` rounds exist, or at
    ``max_run_time``.
    """
    read = clock if clock is not None else time.perf_counter
    begin = read()
    warmup_calls = 0
    warm_start = read()
    while warmup_calls == 0 or read() - warm_start < warmup:
        baseline()
        candidate()
        warmup_calls += 1
    sync()
    calls = 2 * warmup_calls
    resolution = timer_resolution(read)
    base_cal = calibrate_block(
        baseline, sync, read, min_block_time=min_block_time, resolution=resolution
    )
    cand_cal = calibrate_block(
        candidate, sync, read, min_block_time=min_block_time, resolution=resolution
    )
    calls += base_cal.calls_made + cand_cal.calls_made
    base_blocks: list[float] = []
    cand_blocks: list[float] = []
    run_start = read()
    while True:
        rounds = len(base_blocks)
        if rounds % 2 == 0:
            base_blocks.append(time_block(baseline, base_cal.calls_per_block, sync, read))
            cand_blocks.append(time_block(candidate, cand_cal.calls_per_block, sync, read))
        else:
            cand_blocks.append(time_block(candidate, cand_cal.calls_per_block, sync, read))
            base_blocks.append(time_block(baseline, base_cal.calls_per_block, sync, read))
        calls += base_cal.calls_per_block + cand_cal.calls_per_block
        elapsed = read() - run_start
        if elapsed >= max_run_time:
            break
        if elapsed >= min_run_time and len(base_blocks) >= min_blocks:
            break
    return InterleavedRun(
        baseline_blocks=base_blocks,
        candidate_blocks=cand_blocks,
        baseline_calls_per_block=base_cal.calls_per_block,
        candidate_calls_per_block=cand_cal.calls_per_block,
        warmup_calls=warmup_calls,
        calls_made=calls,
        total_time_s=read() - begin,
    )


@dataclass(frozen=True)
class RatioEstimate:
    """candidate / baseline of median latencies with a percentile bootstrap interval."""

    ratio: float
    low: float
    high: float
    confidence: float
    resamples: int
    paired: bool


def _median(values: Sequence[float]) -> float:
    return quantile(values, 0.5)


def ratio_of_medians(
    baseline: Sequence[float],
    candidate: Sequence[float],
    *,
    confidence: float,
    resamples: int,
    paired: bool,
    seed: int = 0,
    floor: float = 0.0,
) -> RatioEstimate:
    """Point ratio median(candidate) / median(baseline) and its bootstrap interval.

    ``floor`` is the smallest relative half-width of the interval: blocks of one run only
    show within-run noise, while the same comparison repeated in a new process moves by
    more (frequency, code and allocator layout), so the interval never claims more precision
    than ``ratio x (1 ± floor)``.

    ``paired=True`` resamples round indices (both sides together, as they were interleaved);
    otherwise each side is resampled on its own (saved reports measured at different times).
    The generator is seeded so a report is reproducible from its raw blocks.
    """
    if not baseline or not candidate:
        raise ValueError("both sides need at least one block time")
    if paired and len(baseline) != len(candidate):
        raise ValueError(
            f"paired resampling needs equal block counts, got {len(baseline)} and {len(candidate)}"
        )
    base_median = _median(baseline)
    if base_median <= 0:
        raise ValueError("the baseline median latency is 0 s; no ratio can be formed")
    point = _median(candidate) / base_median
    rng = random.Random(seed)
    ratios: list[float] = []
    n_base, n_cand = len(baseline), len(candidate)
    for _ in range(resamples):
        if paired:
            picks = [rng.randrange(n_base) for _ in range(n_base)]
            base_sample = [baseline[i] for i in picks]
            cand_sample = [candidate[i] for i in picks]
        else:
            base_sample = [baseline[rng.randrange(n_base)] for _ in range(n_base)]
            cand_sample = [candidate[rng.randrange(n_cand)] for _ in range(n_cand)]
        denominator = _median(base_sample)
        if denominator > 0:
            ratios.append(_median(cand_sample) / denominator)
    if not ratios:
        raise ValueError("every bootstrap resample had a zero baseline median")
    tail = (1.0 - confidence) / 2.0
    return RatioEstimate(
        ratio=point,
        low=min(quantile(ratios, tail), point * (1.0 - floor)),
        high=max(quantile(ratios, 1.0 - tail), point * (1.0 + floor)),
        confidence=confidence,
        resamples=resamples,
        paired=paired,
    )


def latency_verdict(estimate: RatioEstimate, *, min_effect: float) -> tuple[str, str]:
    """(verdict, reason) for a latency ratio (candidate / baseline; below 1 is faster).

    * ``slower``/``faster``: the whole interval is on one side of 1 and the point ratio is
      beyond the owner's minimum effect;
    * ``no_difference``: the whole interval lies within ``1 ± min_effect``;
    * ``inconclusive``: anything else (too noisy or too few blocks to tell).
    """
    upper, lower = 1.0 + min_effect, 1.0 - min_effect
    interval = (
        f"ratio {estimate.ratio:.4f}, {estimate.confidence:.0%} CI "
        f"[{estimate.low:.4f}, {estimate.high:.4f}], minimum effect {min_effect:.1%}"
    )
    if estimate.low > 1.0 and estimate.ratio > upper:
        return "slower", interval
    if estimate.high < 1.0 and estimate.ratio < lower:
        return "faster", interval
    if estimate.low >= lower and estimate.high <= upper:
        return "no_difference", interval
    return "inconclusive", interval
