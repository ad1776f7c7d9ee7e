"""Large effects on a busy host: a verdict when the interval lies beyond what the measured
host disturbance can explain (docs/comparison.md, "Large effects on a loaded host").

A busy host makes the rule of :mod:`.judging` decline (too little CPU, too few undisturbed
rounds). That is right for a 1.3x pair at 5 % CPU share, wrong for a 21x one: no load
makes a 20x effect. The run itself measured how far the load pushed blocks apart:

* the **A/A control**: per round, the ratio between the baseline and its own second block
  (``max(a/b, b/a)``): what the load did to identical work side by side;
* the **pressure** on the A/B rounds the interval rests on: per round, how much more the
  candidate's block waited than the baseline's, ``(wall/CPU of the candidate's block) /
  (wall/CPU of the baseline's)`` (CPU time does not grow while a block waits for a core,
  so this is the waiting's own share of that round's ratio); for ``faster``, its inverse.

Each is taken at the sign-test rank: the largest value once the ``k - 1`` most extreme
rounds are set aside, the same number of rounds the interval sets aside at each end
(``k`` from Binomial(n, 1/2), :func:`.paired.sign_test_rank`), and never below 1. The
verdict is ``slower`` when the (A/A-widened) interval's lower end is above
``max(A/A, waiting)`` and ``faster`` when its upper end is below ``1 / max(A/A, waiting
the other way)`` (the point ratio beyond the minimum effect as always); its reason says
"loaded host". Waiting that fell on the baseline pulls a slowdown's ratio towards 1; it
cannot explain one, so only the waiting in the effect's direction counts.

Why that is beyond the load: for the lower end to pass the bound, at least ``n - k + 1``
rounds must have their ratio above it, while the load pushed at most ``k - 1`` rounds that
far (in the A/A pairs, and in the A/B pairs' own waiting). Without an A/A control,
per-block CPU readings, or ``min_blocks`` rounds of each, nothing is overridden; a host
that was not busy is never overridden either.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..measure.host import BlockTrace
from .paired import PairedEstimate, PairedSides, pick, sign_test_rank, undisturbed_rounds


@dataclass(frozen=True)
class Disturbance:
    """What the run measured about its host: the ratio no load-driven effect exceeds."""

    aa: float  # A/A per-round deviation at the sign-test rank (>= 1)
    slower: float  # the candidate's extra waiting at the sign-test rank (>= 1)
    faster: float  # the baseline's extra waiting at the sign-test rank (>= 1)
    rounds: int  # A/B rounds it rests on

    def bound(self, direction: str) -> float:
        return max(self.aa, self.slower if direction == "slower" else self.faster)

    def text(self, direction: str) -> str:
        waiting = self.slower if direction == "slower" else self.faster
        return (
            f"A/A control x{self.aa:.3g}, waiting x{waiting:.3g}, at the sign-test rank of "
            f"{self.rounds} rounds"
        )


def _at_rank(deviations: Sequence[float], confidence: float) -> float | None:
    """The largest deviation once the k - 1 largest are set aside (None: too few)."""
    rank = sign_test_rank(len(deviations), confidence)
    if rank is None:
        return None
    return sorted(deviations)[len(deviations) - rank]


def _waiting(base: BlockTrace, cand: BlockTrace) -> list[float] | None:
    """Per round, how much more the candidate's block waited: wall/CPU over wall/CPU."""
    rounds = len(base.wall_s)
    if rounds == 0 or len(cand.wall_s) != rounds or len(base.cpu_s) != rounds:
        return None
    if len(cand.cpu_s) != rounds or min(base.cpu_s + cand.cpu_s) <= 0:
        return None
    return [
        (cand.wall_s[i] / cand.cpu_s[i]) / (base.wall_s[i] / base.cpu_s[i]) for i in range(rounds)
    ]


def disturbance(
    sides: PairedSides, traces: tuple[BlockTrace, BlockTrace], min_blocks: int, confidence: float
) -> Disturbance | None:
    """The measured disturbance, or None when the run cannot bound it (no A/A control, no
    per-block CPU readings, fewer than ``min_blocks`` rounds of either)."""
    pairs = list(zip(sides.control_base, sides.control, strict=True))
    waiting = _waiting(*traces)
    if waiting is None:
        return None
    # the rounds the A/B interval rests on: the undisturbed ones when min_blocks of them ran
    # (paired.paired_sides), else every round
    clean = undisturbed_rounds(list(traces), len(waiting))
    waiting = pick(waiting, clean if clean is not None and len(clean) >= min_blocks else None)
    if len(pairs) < min_blocks or len(waiting) < min_blocks:
        return None
    if any(b <= 0 or c <= 0 for b, c in pairs):
        return None
    aa = _at_rank([max(c / b, b / c) for b, c in pairs], confidence)
    slower = _at_rank(waiting, confidence)
    faster = _at_rank([1.0 / w for w in waiting], confidence)
    if aa is None or slower is None or faster is None:
        return None
    return Disturbance(aa, max(1.0, slower), max(1.0, faster), len(waiting))


def beyond(
    estimate: PairedEstimate, found: Disturbance, min_effect: float
) -> tuple[str, str] | None:
    """(verdict, reason) when the interval lies beyond the disturbance; None otherwise."""
    if estimate.low is None or estimate.high is None:
        return None
    interval = f"ratio {estimate.ratio:.4g}, CI [{estimate.low:.4g}, {estimate.high:.4g}]"
    if estimate.low > found.bound("slower") and estimate.ratio > 1.0 + min_effect:
        bound = found.bound("slower")
        return "slower", (
            f"loaded host: CI low x{estimate.low:.3g} is above the x{bound:.3g} the load explains; "
            f"{interval}, a wall-clock ratio that includes the load's share (the work itself "
            f"is at least x{estimate.low / bound:.3g}); the load: {found.text('slower')}"
        )
    if estimate.high < 1.0 / found.bound("faster") and estimate.ratio < 1.0 - min_effect:
        bound = 1.0 / found.bound("faster")
        return "faster", (
            f"loaded host: CI high x{estimate.high:.3g} is below the x{bound:.3g} the load "
            f"explains; {interval}, a wall-clock ratio that includes the load's share (the work "
            f"itself is at most x{estimate.high / bound:.3g}); the load: {found.text('faster')}"
        )
    return None


def within_text(estimate: PairedEstimate, found: Disturbance | None) -> str:
    """Why a declined run stayed declined, for the detailed reason."""
    if found is None:
        return "no A/A control or CPU share to bound the load's effect"
    low = estimate.low if estimate.low is not None else math.nan
    high = estimate.high if estimate.high is not None else math.nan
    direction = "slower" if estimate.ratio >= 1.0 else "faster"
    bound = found.bound(direction)
    return (
        f"the interval [{low:.4g}, {high:.4g}] is not beyond what the load explains "
        f"(x{bound:.3g} either way: {found.text(direction)})"
    )
