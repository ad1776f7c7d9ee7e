"""Interleaved timing of two workloads and a bootstrap interval for their latency ratio.

Both sides are timed by the same primitives as measure_latency (time_block and
calibrate_block). Each round runs one block of the baseline, one of the candidate and (the
in-run A/A control) a second block of the baseline, in an order drawn at random for that
round from a seeded generator: no drift or periodic load of the host can line up with one
side (a fixed AB, BA alternation can), which is what makes the paired sign-test interval of
:mod:`.paired` valid under any noise.

Sampling is adaptive: after ``min_run_time`` and ``min_blocks`` rounds, the interval is
re-estimated each time the rounds grew by a quarter, and sampling stops as soon as the
interval is narrower than the owner's minimum effect, or when the time budget
(``max_run_time``) is spent; the run says which one stopped it.

Saved reports (measured at different times, so not paired) are still compared by the lower
decile of per-call block averages with a bootstrap (:func:`ratio_of_locations`, see
docs/methodology.md).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..measure.host import BlockTrace
from ..measure.latency import calibrate_block, probe_for, probed_block, timer_resolution
from ..measure.latency_options import LatencyOptions, Probe
from ..stats import quantile
from ..workloads import Workload

LOCATION_LEVEL = 0.1
"""Quantile of per-call block averages used as each side's location in a comparison."""

STOP_NARROW = "interval_narrower_than_min_effect"
STOP_BUDGET = "time_budget"
STOP_BACKSTOP = "wall_clock_backstop"
CHECK_GROWTH = 1.25

Enough = Callable[["InterleavedRun"], bool]


@dataclass
class InterleavedRun:
    """Per-call block averages of both sides, in rounds (index i of each is one round)."""

    baseline_blocks: list[float]
    candidate_blocks: list[float]
    baseline_calls_per_block: int
    candidate_calls_per_block: int
    warmup_calls: int
    calls_made: int
    total_time_s: float
    stop_reason: str = STOP_BUDGET
    baseline_trace: BlockTrace = field(default_factory=BlockTrace)
    candidate_trace: BlockTrace = field(default_factory=BlockTrace)
    # the A/A control: a second baseline block in every round (empty without the control)
    control_blocks: list[float] = field(default_factory=list)
    control_trace: BlockTrace = field(default_factory=BlockTrace)

    @property
    def traces(self) -> list[BlockTrace]:
        sides = [self.baseline_trace, self.candidate_trace]
        return [*sides, self.control_trace] if self.control_blocks else sides


def _warm_both(
    baseline: Workload,
    candidate: Workload,
    read: Callable[[], float],
    warmup: float,
    deadline: float,
) -> int:
    calls = 0
    start = read()
    while calls == 0 or read() - start < warmup:
        baseline()
        candidate()
        calls += 1
        if time.monotonic() >= deadline:
            break
    return calls


def run_interleaved(
    baseline: Workload,
    candidate: Workload,
    *,
    sync: Callable[[], None],
    options: LatencyOptions,
    enough: Enough | None = None,
    control: bool = True,
    seed: int = 0,
) -> InterleavedRun:
    """Warm both sides up alternately, calibrate each, then time rounds of one block per
    side (and a second baseline block, the A/A control, when ``control``) in an order drawn
    at random per round (``seed``).

    Stops once ``min_run_time`` has passed, ``min_blocks`` rounds exist and ``enough``
    (the caller's interval test) says so; or at ``max_run_time`` (the time budget); or at
    the wall-clock backstop when the clock does not advance.
    """
    read = options.clock if options.clock is not None else time.perf_counter
    deadline = time.monotonic() + options.backstop_s
    probe = probe_for(options)
    begin = read()
    run = _calibrated(baseline, candidate, sync, read, options, deadline)
    sides = [
        _Side(baseline, run.baseline_calls_per_block, run.baseline_blocks, run.baseline_trace),
        _Side(candidate, run.candidate_calls_per_block, run.candidate_blocks, run.candidate_trace),
    ]
    if control:
        sides.append(
            _Side(baseline, run.baseline_calls_per_block, run.control_blocks, run.control_trace)
        )
    _sample_rounds(run, sides, options, (sync, read, probe), deadline, enough, seed)
    run.total_time_s = read() - begin
    return run


@dataclass(frozen=True)
class _Side:
    """One block slot of a round: what runs, how many calls, where its blocks go."""

    workload: Workload
    calls: int
    blocks: list[float]
    trace: BlockTrace


def _calibrated(
    baseline: Workload,
    candidate: Workload,
    sync: Callable[[], None],
    read: Callable[[], float],
    options: LatencyOptions,
    deadline: float,
) -> InterleavedRun:
    """Both sides warmed up alternately and calibrated: an empty run with one block size."""
    warmup_calls = _warm_both(baseline, candidate, read, options.warmup, deadline)
    sync()
    resolution = timer_resolution(read)
    cal = [
        calibrate_block(
            side,
            sync,
            read,
            min_block_time=options.min_block_time,
            resolution=resolution,
            deadline=deadline,
        )
        for side in (baseline, candidate)
    ]
    # one block size for every side: under load a block's per-call average depends on how
    # many calls it holds (a longer block catches a preemption more often but spreads it
    # over more calls), so sides of unequal block sizes are not exchangeable and even an
    # A/A pair would differ; the larger size keeps both above the target
    per_block = max(c.calls_per_block for c in cal)
    return InterleavedRun(
        [],
        [],
        per_block,
        per_block,
        warmup_calls,
        2 * warmup_calls + cal[0].calls_made + cal[1].calls_made,
        0.0,
    )


def _sample_rounds(
    run: InterleavedRun,
    sides: list[_Side],
    options: LatencyOptions,
    timing: tuple[Callable[[], None], Callable[[], float], Probe | None],
    deadline: float,
    enough: Enough | None,
    seed: int,
) -> None:
    """Rounds of one block per side in a seeded random order, until the stop rule says."""
    sync, read, probe = timing
    per_round = sum(side.calls for side in sides)
    shuffle = random.Random(seed)
    run_start = read()
    next_check = options.min_blocks
    while True:
        for side in shuffle.sample(sides, len(sides)):
            side.blocks.append(
                probed_block(side.workload, side.calls, sync, read, probe, side.trace)
            )
        run.calls_made += per_round
        elapsed = read() - run_start
        rounds = len(run.baseline_blocks)
        if elapsed >= options.max_run_time:
            run.stop_reason = STOP_BUDGET
            return
        if time.monotonic() >= deadline:
            run.stop_reason = STOP_BACKSTOP
            return
        if elapsed < options.min_run_time or rounds < max(options.min_blocks, next_check):
            continue
        next_check = math.ceil(rounds * CHECK_GROWTH)
        if enough is not None and enough(run):
            run.stop_reason = STOP_NARROW
            return


@dataclass(frozen=True)
class RatioEstimate:
    """candidate / baseline of latency locations (quantile ``level``) with a percentile
    bootstrap interval."""

    ratio: float
    low: float
    high: float
    confidence: float
    resamples: int
    paired: bool
    level: float = 0.5


def _bootstrap_locations(
    baseline: np.ndarray,
    candidate: np.ndarray,
    *,
    level: float,
    resamples: int,
    paired: bool,
    seed: int,
) -> np.ndarray:
    """Ratios of resampled locations, drawn in chunks so memory stays small."""
    rng = np.random.default_rng(seed)
    n_base, n_cand = len(baseline), len(candidate)
    chunk = max(1, min(resamples, 2_000_000 // max(n_base, n_cand)))
    ratios: list[np.ndarray] = []
    done = 0
    while done < resamples:
        size = min(chunk, resamples - done)
        picks = rng.integers(0, n_base, size=(size, n_base))
        base = np.quantile(baseline[picks], level, axis=1)
        cand_picks = picks if paired else rng.integers(0, n_cand, size=(size, n_cand))
        cand = np.quantile(candidate[cand_picks], level, axis=1)
        keep = base > 0
        ratios.append(cand[keep] / base[keep])
        done += size
    return np.concatenate(ratios)


def ratio_of_locations(
    baseline: Sequence[float],
    candidate: Sequence[float],
    *,
    level: float = LOCATION_LEVEL,
    confidence: float,
    resamples: int,
    paired: bool,
    seed: int = 0,
    floor: float = 0.0,
) -> RatioEstimate:
    """Point ratio q(candidate) / q(baseline) at quantile ``level`` and its bootstrap interval.

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
    base_location = quantile(baseline, level)
    if base_location <= 0:
        raise ValueError("the baseline latency is 0 s; no ratio can be formed")
    point = quantile(candidate, level) / base_location
    ratios = _bootstrap_locations(
        np.asarray(baseline, dtype=float),
        np.asarray(candidate, dtype=float),
        level=level,
        resamples=resamples,
        paired=paired,
        seed=seed,
    )
    if ratios.size == 0:
        raise ValueError("every bootstrap resample had a zero baseline latency")
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(ratios, [tail, 1.0 - tail])
    return RatioEstimate(
        ratio=point,
        low=min(float(low), point * (1.0 - floor)),
        high=max(float(high), point * (1.0 + floor)),
        confidence=confidence,
        resamples=resamples,
        paired=paired,
        level=level,
    )


def latency_verdict(estimate: RatioEstimate, *, min_effect: float) -> tuple[str, str]:
    """(verdict, reason) for a latency ratio (candidate / baseline; below 1 is faster).

    * ``slower``/``faster``: the interval excludes no change (1) and the point ratio is
      beyond the owner's minimum effect; noise never overrides this (it is shown beside the
      verdict as a warning by the caller);
    * ``no_difference``: the whole interval lies within ``1 ± min_effect``;
    * ``inconclusive``: only when the interval does not decide (it reaches both sides of 1,
      or beyond the minimum effect while the point ratio is within it).
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
