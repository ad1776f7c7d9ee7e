"""Steps of every series of a History: fitted per comparable segment, never across one.

Only complete points are fitted (a partial value is a lower bound, an unavailable one has
none); each step lies in the commit range after the last point before it up to the first
point after it, which is one commit only when those two commits are adjacent.
"""

from __future__ import annotations

from dataclasses import dataclass

from .series import History, Point, Series
from .steps import DEFAULT_CONFIDENCE, fit_steps

_Z95 = 1.96  # the points' intervals are 95% intervals


@dataclass(slots=True)
class Step:
    metric: str
    segment: int
    before: str  # last commit measured before the step
    after: str  # first commit measured after it
    commits: list[str]  # the range it lies in: after `before`, up to and including `after`
    single_commit: bool
    ratio: float
    ci_low: float
    ci_high: float
    confidence: float
    direction: str  # "increased" / "decreased"
    worse: bool  # in the metric's bad direction (higher, except a throughput)
    beyond_min_effect: bool | None  # None: no minimum effect set (the default: report only)


def higher_is_better(name: str) -> bool:
    """Throughputs (``*_per_s``) improve upwards; latency, memory, FLOPs downwards."""
    return name.endswith("_per_s")


def _sigma(point: Point) -> float | None:
    if point.low is None or point.high is None:
        return None
    return (point.high - point.low) / (2.0 * _Z95)


def series_steps(
    history: History,
    series: Series,
    *,
    min_effect: float | None = None,
    confidence: float = DEFAULT_CONFIDENCE,
    penalty: float | None = None,
) -> list[Step]:
    """The confident steps of one series, segment by segment."""
    steps: list[Step] = []
    shas = [c.sha for c in history.commits]
    for number, segment in enumerate(series.segments):
        fitted = [p for p in series.points[segment.start : segment.stop]
                  if p.status == "complete" and p.value is not None and p.value > 0]  # fmt: skip
        found = fit_steps(
            [float(p.value) for p in fitted if p.value is not None],
            [_sigma(p) for p in fitted],
            penalty=penalty,
            confidence=confidence,
        )
        for fit in found:
            before, after = fitted[fit.before], fitted[fit.after]
            increased = fit.ratio > 1.0
            beyond = None
            if min_effect is not None:
                beyond = fit.ci_low > 1.0 + min_effect or fit.ci_high < 1.0 - min_effect
            steps.append(
                Step(
                    metric=series.metric,
                    segment=number,
                    before=before.commit,
                    after=after.commit,
                    commits=shas[before.index + 1 : after.index + 1],
                    single_commit=after.index == before.index + 1,
                    ratio=fit.ratio,
                    ci_low=fit.ci_low,
                    ci_high=fit.ci_high,
                    confidence=fit.confidence,
                    direction="increased" if increased else "decreased",
                    worse=increased != higher_is_better(series.name),
                    beyond_min_effect=beyond,
                )
            )
    return steps


def detect_steps(
    history: History,
    *,
    min_effect: float | None = None,
    confidence: float = DEFAULT_CONFIDENCE,
    penalty: float | None = None,
) -> list[Step]:
    """Fill every series' ``steps`` and return them all. ``min_effect`` (a ratio change,
    e.g. 0.1 for 10%) only marks steps whose whole interval lies beyond it; default off."""
    if min_effect is not None and not 0.0 <= min_effect < 1.0:
        raise ValueError(f"min_effect must be in [0, 1), got {min_effect!r}")
    found: list[Step] = []
    for series in history.series:
        series.steps = series_steps(
            history, series, min_effect=min_effect, confidence=confidence, penalty=penalty
        )
        found += series.steps
    return found


def gate_failures(steps: list[Step]) -> list[Step]:
    """Steps that fail a gate: confident, in the bad direction, beyond the owner's minimum."""
    return [s for s in steps if s.worse and s.beyond_min_effect]


__all__ = ["Step", "detect_steps", "gate_failures", "higher_is_better", "series_steps"]
