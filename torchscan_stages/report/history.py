"""``history``: committed metrics over git history, their steps, as one versioned report.

Written by ``python -m torchscan_stages history --json`` (``torchscan_stages.history``) and
read back by ``load_report`` like every kind, so a saved history renders again
(``render history.json -o page.html``) and a damaged one is refused in one line. Each point
says whether its evidence is clean; each step whether it is confident or suspect (it rests
on weak points and needs a quiet rerun, with the command).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from .metric import FiniteFloat, NonNegInt, Status, _Model
from .models import Verdict, _Report


class HistoryCommit(_Model):
    sha: str
    parents: list[str] = Field(default_factory=list)
    time: int  # committer time, seconds since the epoch (UTC)
    subject: str = ""


class HistoryPoint(_Model):
    """One metric at one commit; ``value`` is complete, or a partial lower bound."""

    commit: str
    index: NonNegInt  # position of the commit in ``commits``
    status: Status
    value: FiniteFloat | None = None
    low: FiniteFloat | None = None  # the point's own interval, where known
    high: FiniteFloat | None = None
    interval: str | None = None  # how the interval was obtained
    note: str | None = None  # why partial / unavailable
    clean: bool = False  # complete, no validity warning, evidence recorded
    warnings: list[str] = Field(default_factory=list)
    evidence: str | None = None  # why the point is weak
    verdict: Verdict | None = None  # a comparison metric's verdict at this commit


class HistorySegment(_Model):
    """Points ``start`` to ``stop - 1`` share one comparability key (never joined)."""

    start: NonNegInt
    stop: NonNegInt
    key: dict[str, str] = Field(default_factory=dict)
    change: list[str] = Field(default_factory=list)  # what differs from the segment before


class HistoryStep(_Model):
    """A step between the last point before it and the first after it."""

    metric: str
    segment: NonNegInt
    before: str
    after: str
    commits: list[str]  # the range it lies in
    single_commit: bool
    ratio: FiniteFloat | None  # None: beyond a float (an overflowed ratio)
    ci_low: FiniteFloat | None
    ci_high: FiniteFloat | None
    confidence: float
    direction: Literal["increased", "decreased"]
    worse: bool
    beyond_min_effect: bool | None = None
    suspect: bool = False  # only weak points show it: needs a quiet rerun, never gated
    rests_on: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    rerun: str | None = None


class HistorySeries(_Model):
    metric: str  # "STAGE/NAME"
    stage: str
    name: str
    unit: str = ""
    points: list[HistoryPoint]
    segments: list[HistorySegment] = Field(default_factory=list)
    steps: list[HistoryStep] = Field(default_factory=list)

    @model_validator(mode="after")
    def _fits_together(self) -> HistorySeries:
        """Segments tile the points in order, and a point sits at its own position:
        the page draws lines per segment and must never read past a series."""
        stop = 0
        for number, segment in enumerate(self.segments):
            if segment.start != stop or segment.stop <= segment.start:
                raise ValueError(f"segments.{number}: [{segment.start}, {segment.stop}) does "
                                 f"not continue from {stop}")  # fmt: skip
            stop = segment.stop
        if self.segments and stop != len(self.points):
            raise ValueError(f"segments end at {stop}, but there are {len(self.points)} points")
        for number, point in enumerate(self.points):
            if point.index != number:
                raise ValueError(f"points.{number}: index {point.index}, expected {number}")
        return self


class HistoryReport(_Report):
    """Every series over ``commits`` (oldest first), and all steps (confident, suspect)."""

    kind: Literal["history"] = "history"
    repo: str
    rev_range: str
    settings: dict[str, Any] = Field(default_factory=dict)
    reports_read: NonNegInt = 0
    range_note: str | None = None  # how a default range was chosen
    commits: list[HistoryCommit] = Field(default_factory=list)
    series: list[HistorySeries] = Field(default_factory=list)
    steps: list[HistoryStep] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_point_per_commit(self) -> HistoryReport:
        known = {c.sha for c in self.commits}
        for number, series in enumerate(self.series):
            if len(series.points) != len(self.commits):
                raise ValueError(f"series.{number}: {len(series.points)} points for "
                                 f"{len(self.commits)} commits")  # fmt: skip
            for step in series.steps:
                if step.before not in known or step.after not in known:
                    raise ValueError(f"series.{number}: a step names a commit not in commits")
        return self


__all__ = [
    "HistoryCommit",
    "HistoryPoint",
    "HistoryReport",
    "HistorySegment",
    "HistorySeries",
    "HistoryStep",
]
