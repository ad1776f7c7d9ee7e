"""One metric over commits as inline SVG: the history page's chart.

Drawn for people reading a step: the axis of a non-negative metric starts at 0 (a 10%
step is not drawn as a cliff), bytes are labelled in KiB/MiB/GiB, times in s/ms/µs, and the
left margin is as wide as the longest tick label (never clipped). A line joins the complete
points of one comparable segment only: it never crosses a break. Clean points are filled;
weak ones (a validity warning, evidence not recorded) and partial ones are hollow;
unavailable ones are crosses on the axis; each with its reason on hover.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from markupsafe import Markup, escape

from ..report.history import HistoryPoint, HistorySeries
from .format import human, seconds
from .svg import nice_ticks

W, H, TOP, BOTTOM, RIGHT = 760, 250, 16, 30, 16
_CHAR_W = 7.0  # user units per character of an 11px tick label (digits and units fit)
_IEC = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def _e(text: object) -> str:
    return str(escape(str(text)))


def _f(x: float) -> str:
    return f"{x:.1f}"


def anchor(sha: str, prefix: str = "") -> str:
    """The id of a commit's row in the page's commit table (``prefix``: the report's)."""
    return f"{prefix}c-{sha[:12]}"


def display(value: float, unit: str) -> str:
    """A value for people in the unit the history names (``B`` is bytes)."""
    return human(value, "bytes" if unit == "B" else unit)


def _bounds(points: list[HistoryPoint]) -> tuple[float, float]:
    values = [v for p in points for v in (p.value, p.low, p.high) if v is not None]
    if not values:
        return 0.0, 1.0
    low, high = min(values), max(values)
    if low >= 0:
        low = 0.0  # a non-negative metric: its axis starts at 0
    pad = (high - low) * 0.08 or abs(high) * 0.05 or 1.0
    return low, high + pad


def axis(points: list[HistoryPoint], unit: str) -> tuple[list[float], list[str]]:
    """Round ticks over the values and intervals, and their labels."""
    low, high = _bounds(points)
    if unit == "B":  # ticks round in the binary unit they are labelled in
        big = max(abs(low), abs(high), 1.0)
        power = min(int(math.log(big, 1024)), len(_IEC) - 1)
        base = 1024.0**power
        ticks = [t * base for t in nice_ticks(low / base, high / base, 5)]
        return ticks, [f"{t / base:g} {_IEC[power]}" for t in ticks]
    ticks = nice_ticks(low, high, 5)
    if unit == "s":
        return ticks, [seconds(t) for t in ticks]
    return ticks, [display(t, unit) for t in ticks]


class _Frame:
    """Where a commit index and a value land in the chart."""

    def __init__(self, ticks: list[float], labels: list[str], count: int) -> None:
        self.left = max(50.0, _CHAR_W * max(len(x) for x in labels) + 12)
        self.plot_w, self.plot_h = W - self.left - RIGHT, H - TOP - BOTTOM
        self.y0, self.y1, self.count = ticks[0], ticks[-1], count
        self.step = self.plot_w / max(count - 1, 1)

    def x(self, index: float) -> float:
        return self.left + (index * self.step if self.count > 1 else self.plot_w / 2)

    def y(self, value: float) -> float:
        span = (self.y1 - self.y0) or 1.0
        return TOP + self.plot_h - (value - self.y0) / span * self.plot_h


def chart(
    series: HistorySeries, count: int, commits: Callable[[str], int], prefix: str = ""
) -> Markup:
    """The SVG of one series over ``count`` commits (``commits``: sha -> its index); each
    point links to its commit's row (ids under ``prefix``)."""
    points, unit = series.points, series.unit
    ticks, labels = axis(points, unit)
    fr = _Frame(ticks, labels, count)
    out = [f'<svg class="chart" viewBox="0 0 {W} {H}" role="img" '
           f'aria-label="{_e(series.metric)} over {count} commits">']  # fmt: skip
    for tick, label in zip(ticks, labels, strict=True):
        y = _f(fr.y(tick))
        out.append(
            f'<line class="grid" x1="{_f(fr.left)}" y1="{y}" x2="{_f(fr.left + fr.plot_w)}" '
            f'y2="{y}"/><text class="tick" x="{_f(fr.left - 6)}" y="{_f(fr.y(tick) + 4)}" '
            f'text-anchor="end">{_e(label)}</text>'
        )
    out += _step_ranges(series, fr, commits)
    out += _bands(series, fr)
    out += _breaks(series, fr)
    out += _lines(series, fr)
    out += _markers(points, unit, fr, prefix)
    out.append(
        f'<text class="tick" x="{_f(fr.left + fr.plot_w / 2)}" y="{H - 8}" '
        f'text-anchor="middle">commits, oldest to newest ({count})</text></svg>'
    )
    return Markup("".join(out))


def _step_ranges(series: HistorySeries, fr: _Frame, commits: Callable[[str], int]) -> list[str]:
    out = []
    for s in series.steps:
        a, b = commits(s.before), commits(s.after)
        kind = "steprange suspect" if s.suspect else "steprange"
        what = "suspect step (needs a quiet rerun)" if s.suspect else "step"
        ratio = f"x{s.ratio:.3g}" if s.ratio is not None else "unbounded"
        title = f"{what} {ratio} in {len(s.commits)} commit(s) after {s.before[:10]}"
        out.append(
            f'<rect class="{kind}" x="{_f(fr.x(a))}" y="{TOP}" '
            f'width="{_f(max(fr.x(b) - fr.x(a), 2))}" height="{_f(fr.plot_h)}">'
            f"<title>{_e(title)}</title></rect>"
        )
    return out


def _segment_points(series: HistorySeries) -> list[list[HistoryPoint]]:
    return [series.points[g.start : g.stop] for g in series.segments]


def _bands(series: HistorySeries, fr: _Frame) -> list[str]:
    """One interval band per run of points that state an interval, inside one segment."""
    out = []
    for segment in _segment_points(series):
        run: list[tuple[float, float, float]] = []  # x, y of the high end, y of the low end
        for p in [*segment, None]:
            banded = p is not None and p.status == "complete"
            if banded and p is not None and p.low is not None and p.high is not None:
                run.append((fr.x(p.index), fr.y(p.high), fr.y(p.low)))
                continue
            if run:
                out.append(_band(run))
            run = []
    return out


def _band(run: list[tuple[float, float, float]]) -> str:
    if len(run) == 1:  # one point: a short vertical bar
        x, high, low = run[0]
        run = [(x - 3, high, low), (x + 3, high, low)]
    upper = [f"{_f(x)},{_f(high)}" for x, high, _ in run]
    lower = [f"{_f(x)},{_f(low)}" for x, _, low in reversed(run)]
    return f'<polygon class="band" points="{" ".join(upper + lower)}"/>'


def _breaks(series: HistorySeries, fr: _Frame) -> list[str]:
    out = []
    for segment in series.segments[1:]:
        x = fr.x(segment.start - 0.5)  # halfway between the two segments' commits
        what = "; ".join(segment.change) or "comparability changed"
        right = x > W - RIGHT - 90  # near the right edge the label goes left of the line
        tx, anchor_ = (x - 3, "end") if right else (x + 3, "start")
        out.append(
            f'<g><title>new segment: {_e(what)}</title><line class="brk" x1="{_f(x)}" '
            f'y1="{TOP}" x2="{_f(x)}" y2="{_f(TOP + fr.plot_h)}"/><text class="tick" '
            f'x="{_f(tx)}" y="{TOP + 10}" text-anchor="{anchor_}">'
            f"{_e(break_label(segment.change))}</text></g>"
        )
    return out


def break_label(change: list[str]) -> str:
    fields = [c.split(":", 1)[0] for c in change]
    return "env changed" if "env" in fields else (", ".join(fields) or "break") + " changed"


def _lines(series: HistorySeries, fr: _Frame) -> list[str]:
    """One polyline per segment through its complete points: never across a break."""
    out = []
    for segment in _segment_points(series):
        line = [f"{_f(fr.x(p.index))},{_f(fr.y(p.value))}" for p in segment
                if p.status == "complete" and p.value is not None]  # fmt: skip
        if len(line) > 1:
            out.append(f'<polyline class="ln s0" points="{" ".join(line)}"/>')
    return out


def point_title(p: HistoryPoint, unit: str) -> str:
    """A point's hover text: status, value, interval, warnings, and why."""
    shown = display(p.value, unit) if p.value is not None else "no value"
    bound = "≥ " if p.status == "partial" else ""
    title = f"{p.commit[:10]}: {p.status} {bound}{shown}"
    if p.low is not None and p.high is not None:
        title += f" [{display(p.low, unit)}, {display(p.high, unit)}]"
    if p.warnings:
        title += f"; warnings: {', '.join(p.warnings)}"
    for words in (p.evidence, p.note):
        if words:
            title += f"; {words}"
    return title


def _markers(points: list[HistoryPoint], unit: str, fr: _Frame, prefix: str) -> list[str]:
    out = []
    floor_y = TOP + fr.plot_h
    for p in points:
        x = fr.x(p.index)
        if p.status == "unavailable" or p.value is None:
            mark = f'<path class="na" d="M{_f(x - 4)},{_f(floor_y - 8)}l8,8m0,-8l-8,8"/>'
        else:
            hollow = "" if p.status == "complete" and p.clean else " hollow"
            mark = f'<circle class="mk s0{hollow}" cx="{_f(x)}" cy="{_f(fr.y(p.value))}" r="3.5"/>'
        out.append(
            f'<a href="#{anchor(p.commit, prefix)}" class="pt pt-{_e(p.status)}">'
            f"<title>{_e(point_title(p, unit))}</title>{mark}</a>"
        )
    return out


__all__ = ["anchor", "axis", "break_label", "chart", "display", "point_title"]
