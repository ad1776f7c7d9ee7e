"""The verdict statistic of an interleaved comparison: per-round paired ratios, a
distribution-free sign-test interval, undisturbed rounds and the in-run A/A control.

Why this and not a bootstrap of each side's quantile: a bootstrap treats blocks as draws
from one distribution, which a host whose load changes every few seconds does not give
(at load 26 on 2 cores that gave A/A comparisons "faster" 0.903 [0.840, 0.995]). Here every
round runs the baseline, the candidate and a second baseline block (the A/A control) in an
order drawn at random for that round. Whatever the host does, as long as it does not know
which workload runs in which slot, the per-round log-ratio ``log(candidate / baseline)``
minus its true value is as likely to be positive as negative, independently across rounds;
the sign-test interval for its median (order statistics chosen from Binomial(n, 1/2)) then
has at least its nominal coverage with no assumption on the noise's shape or stationarity.

Pairs in which the scheduler took the CPU away from either block (the per-block probe saw an
involuntary context switch and the block's CPU time fell more than 5% behind its wall time)
are set aside, for the A/B pairs and the A/A pairs separately: the choice depends only on the
host, never on which workload ran where, so the argument above still holds, and the rounds
kept show the workloads' own ratio rather than one pulled towards 1 by added waiting.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..measure.host import BlockTrace
from .interleave import InterleavedRun


@dataclass(frozen=True)
class PairedEstimate:
    """exp(median of per-round log-ratios) with its sign-test interval (None: too few)."""

    ratio: float
    low: float | None
    high: float | None
    confidence: float
    rounds: int


def _log_binomial_half(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) - n * math.log(2.0)


def sign_test_rank(n: int, confidence: float) -> int | None:
    """The largest k (1-based) with 2 P(Binomial(n, 1/2) <= k - 1) <= 1 - confidence, so
    that [x_(k), x_(n+1-k)] of n sorted values covers their median with at least
    ``confidence``; None when even [x_(1), x_(n)] does not (n = 5 at 95%: 2 / 32 = 6.25%)."""
    alpha = 1.0 - confidence
    cumulative = 0.0
    rank = 0
    for k in range(0, n // 2 + 1):
        cumulative += math.exp(_log_binomial_half(n, k))
        if 2.0 * cumulative > alpha:
            break
        rank = k + 1
    return rank if rank >= 1 else None


def _median(sorted_values: Sequence[float]) -> float:
    n = len(sorted_values)
    middle = n // 2
    if n % 2:
        return sorted_values[middle]
    return 0.5 * (sorted_values[middle - 1] + sorted_values[middle])


def paired_ratio(
    baseline: Sequence[float], candidate: Sequence[float], *, confidence: float
) -> PairedEstimate:
    """candidate / baseline as exp(median(log c_i - log b_i)) over paired rounds i, with the
    sign-test interval of that median (exact under any noise that is blind to the order)."""
    if len(baseline) != len(candidate):
        raise ValueError(
            f"paired rounds need equal block counts, got {len(baseline)} and {len(candidate)}"
        )
    if not baseline:
        raise ValueError("both sides need at least one block time")
    if min(baseline) <= 0 or min(candidate) <= 0:
        raise ValueError("a block time is 0 s (below the clock's resolution); no ratio")
    logs = sorted(math.log(c) - math.log(b) for b, c in zip(baseline, candidate, strict=True))
    rank = sign_test_rank(len(logs), confidence)
    point = math.exp(_median(logs))
    if rank is None:
        return PairedEstimate(point, None, None, confidence, len(logs))
    low, high = math.exp(logs[rank - 1]), math.exp(logs[len(logs) - rank])
    return PairedEstimate(point, low, high, confidence, len(logs))


UNDISTURBED_FRACTION = 0.95
"""A block with an involuntary switch still counts as undisturbed when its CPU time per
wall second is at least this share of the 90th percentile block's, or of 1 when that is
lower (it lost under 5% of its wall time)."""


def undisturbed_blocks(trace: BlockTrace) -> list[bool]:
    """Per block: no involuntary context switch, or CPU/wall within 5% of the best blocks'."""
    fractions = [
        cpu / wall if wall > 0 else 0.0 for cpu, wall in zip(trace.cpu_s, trace.wall_s, strict=True)
    ]
    # never below 1 CPU second per wall second: a run in which every block was preempted
    # alike must not make a preempted block look typical
    best = max(1.0, sorted(fractions)[int(0.9 * (len(fractions) - 1))]) if fractions else 1.0
    return [
        switches == 0 or fraction >= UNDISTURBED_FRACTION * best
        for switches, fraction in zip(trace.involuntary, fractions, strict=True)
    ]


def undisturbed_rounds(traces: Sequence[BlockTrace], rounds: int) -> list[int] | None:
    """Indices of rounds whose blocks in ``traces`` all ran undisturbed (see
    :func:`undisturbed_blocks`); None when the blocks were not probed (injected clock), so
    no round can be told apart."""
    if rounds == 0 or any(len(trace.involuntary) != rounds for trace in traces):
        return None
    flags = [undisturbed_blocks(trace) for trace in traces]
    return [i for i in range(rounds) if all(flag[i] for flag in flags)]


def cpu_share(traces: Sequence[BlockTrace]) -> float | None:
    """Process CPU time per wall second over every probed block of every side."""
    wall = sum(sum(trace.wall_s) for trace in traces)
    if wall <= 0 or any(not trace.wall_s for trace in traces):
        return None
    return sum(sum(trace.cpu_s) for trace in traces) / wall


def widened(
    estimate: PairedEstimate, control: PairedEstimate | None, floor: float
) -> PairedEstimate:
    """The A/B interval widened on both sides by the A/A control's offset from 1 (in log
    terms), and never narrower than ``ratio x (1 ± floor)``."""
    if estimate.low is None or estimate.high is None:
        return estimate
    offset = abs(math.log(control.ratio)) if control is not None else 0.0
    low = min(estimate.low * math.exp(-offset), estimate.ratio * (1.0 - floor))
    high = max(estimate.high * math.exp(offset), estimate.ratio * (1.0 + floor))
    return PairedEstimate(estimate.ratio, low, high, estimate.confidence, estimate.rounds)


def pick(values: Sequence[float], indices: Sequence[int] | None) -> list[float]:
    return list(values) if indices is None else [values[i] for i in indices]


@dataclass(frozen=True)
class PairedSides:
    """The pairs a verdict uses: A/B (baseline, candidate) and A/A (baseline, control), each
    from the rounds where both of its blocks ran undisturbed, or from every round when
    fewer than ``min_blocks`` did (``undisturbed`` then says how few)."""

    base: list[float]
    cand: list[float]
    undisturbed: int | None
    control_base: list[float]
    control: list[float]


def paired_sides(run: InterleavedRun, min_blocks: int) -> PairedSides:
    rounds = len(run.baseline_blocks)

    def pairs(other: list[float], trace: BlockTrace) -> tuple[list[float], list[float], int | None]:
        clean = undisturbed_rounds([run.baseline_trace, trace], rounds)
        used = clean if clean is not None and len(clean) >= min_blocks else None
        found = len(clean) if clean is not None else None
        return pick(run.baseline_blocks, used), pick(other, used), found

    base, cand, undisturbed = pairs(run.candidate_blocks, run.candidate_trace)
    control_base: list[float] = []
    control: list[float] = []
    if run.control_blocks:
        control_base, control, _ = pairs(run.control_blocks, run.control_trace)
    return PairedSides(base, cand, undisturbed, control_base, control)


def rounds_record(run: InterleavedRun) -> dict[str, Any]:
    """What a saved comparison keeps beyond the sides' blocks to recompute its verdict."""

    def trace(found: BlockTrace) -> dict[str, list[Any]]:
        return {"wall_s": found.wall_s, "cpu_s": found.cpu_s, "involuntary": found.involuntary}

    return {
        "calls_per_block": run.baseline_calls_per_block,
        "control_blocks_s": list(run.control_blocks),
        "traces": [trace(t) for t in (run.baseline_trace, run.candidate_trace, run.control_trace)],
    }


def run_from_record(base: list[float], cand: list[float], record: dict[str, Any]) -> InterleavedRun:
    """The interleaved run a saved comparison recorded (see :func:`rounds_record`)."""
    calls = int(record["calls_per_block"])
    run = InterleavedRun(list(base), list(cand), calls, calls, 0, 0, 0.0)
    run.control_blocks = [float(v) for v in record["control_blocks_s"]]
    for target, saved in zip(
        (run.baseline_trace, run.candidate_trace, run.control_trace), record["traces"], strict=True
    ):
        target.wall_s = [float(v) for v in saved["wall_s"]]
        target.cpu_s = [float(v) for v in saved["cpu_s"]]
        target.involuntary = [int(v) for v in saved["involuntary"]]
    return run
