"""Inline SVG charts: no script, no fonts, no network; styled by the page's CSS classes.

Every string placed in a chart is escaped here (the charts are built in Python, outside
jinja's autoescape). Partial values are drawn as open, dashed bars labelled ``≥``;
unavailable values are never drawn as zero: they are listed beside the chart instead.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

from ..report import LatencyStats, MetricResult, Status
from ..stats import quantile
from .format import metric_cell, seconds

_LABEL_CHARS = 30


@dataclass(frozen=True, slots=True)
class Bar:
    """One bar: ``value`` is the complete value or the partial lower bound."""

    label: str
    value: float
    status: Status
    text: str
    title: str


def metric_bar(label: str, result: MetricResult) -> Bar:
    """The bar of one MetricResult, labelled and titled as its table cell."""
    cell = metric_cell(result)
    return Bar(label, float(result.known_value or 0), result.status, cell.text, cell.title)


@dataclass(frozen=True, slots=True)
class Point:
    x: str
    value: float | None
    status: Status
    title: str


def _e(text: object) -> str:
    return str(escape(str(text)))


def _fmt(x: float) -> str:
    return f"{x:.1f}".rstrip("0").rstrip(".")


def _short(label: str) -> str:
    return label if len(label) <= _LABEL_CHARS else label[: _LABEL_CHARS - 1] + "…"


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering [low, high] (1-2-5 steps)."""
    if not (math.isfinite(low) and math.isfinite(high)):
        raise ValueError(f"nice_ticks: non-finite range ({low}, {high})")
    if high <= low:
        high = low + (abs(low) or 1.0)
    raw = (high - low) / max(count - 1, 1)
    magnitude = 10.0 ** math.floor(math.log10(raw))  # a float: huge ranges stay finite
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    start = math.floor(low / step) * step
    ticks: list[float] = []
    value = start
    while value <= high + step * 1e-9:
        ticks.append(round(value, 12))
        value += step
    if ticks[-1] < high:
        ticks.append(round(value, 12))
    return ticks


def bar_chart(bars: Sequence[Bar], *, label: str, missing: Sequence[str] = ()) -> Markup:
    """Horizontal bars scaled to the largest known value; a note lists missing items."""
    row, left, width, right = 24, 200, 620, 110
    top = 6
    height = top + row * max(len(bars), 1) + 6
    largest = max((b.value for b in bars), default=0.0)
    scale = (width - left - right) / largest if largest > 0 else 0.0
    parts = [
        f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{_e(label)}" preserveAspectRatio="xMinYMin meet">'
    ]
    for i, bar in enumerate(bars):
        y = top + i * row
        length = max(bar.value * scale, 1.0 if bar.value > 0 else 0.0)
        cls = "bar" if bar.status == "complete" else "bar part"
        parts.append(
            f"<g><title>{_e(bar.label)}: {_e(bar.title)}</title>"
            f'<text class="lbl" x="{left - 8}" y="{y + 16}" text-anchor="end">'
            f"{_e(_short(bar.label))}</text>"
            f'<rect class="{cls}" x="{left}" y="{y + 4}" width="{_fmt(length)}" height="16" '
            f'rx="2"/><text class="val" x="{_fmt(left + length + 6)}" y="{y + 16}">'
            f"{_e(bar.text)}</text></g>"
        )
    if not bars:
        parts.append(f'<text class="lbl" x="{left}" y="{top + 16}">nothing to draw</text>')
    parts.append("</svg>")
    if missing:
        shown = ", ".join(missing[:8]) + (
            f" and {len(missing) - 8} more" if len(missing) > 8 else ""
        )
        parts.append(f'<p class="chart-note">Not drawn (unavailable): {_e(shown)}</p>')
    return Markup("".join(parts))


def latency_plot(block_times_s: Sequence[float], stats: LatencyStats | None) -> Markup:
    """Box (q1-q3, median, min-max whiskers) over a strip of every raw block average.

    The box uses the report's own statistics when present, so the chart and the table never
    disagree; the dots are the raw blocks.
    """
    times = sorted(float(t) for t in block_times_s)
    if not times:
        return Markup('<p class="chart-note">No raw block times were recorded.</p>')
    if stats is not None:
        q1, med, q3, lo, hi = stats.q1, stats.median, stats.q3, stats.min, stats.max
    else:
        q1, med, q3 = (quantile(times, q) for q in (0.25, 0.5, 0.75))
        lo, hi = times[0], times[-1]
    lo_axis, hi_axis = min(lo, times[0]), max(hi, times[-1])
    pad = (hi_axis - lo_axis) * 0.05 or abs(hi_axis) * 0.05 or 1e-9
    if abs(lo_axis) + abs(hi_axis) > 1e300:  # the padded axis and its ticks would overflow
        return Markup('<p class="chart-note">Block times too large to plot.</p>')
    ticks = nice_ticks(lo_axis - pad, hi_axis + pad, 5)
    x0, x1 = ticks[0], ticks[-1]
    width, left, right, height = 640, 36, 36, 150
    span = (x1 - x0) or 1.0

    def sx(v: float) -> float:
        return left + (v - x0) / span * (width - left - right)

    mid = 58
    parts = [
        f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="latency distribution over {len(times)} blocks">'
    ]
    for tick in ticks:
        x = _fmt(sx(tick))
        parts.append(
            f'<line class="grid" x1="{x}" y1="10" x2="{x}" y2="112"/>'
            f'<text class="tick" x="{x}" y="130" text-anchor="middle">{_e(seconds(tick))}</text>'
        )
    parts.append(
        f'<line class="whisk" x1="{_fmt(sx(lo))}" y1="{mid}" x2="{_fmt(sx(hi))}" y2="{mid}"/>'
        f'<line class="whisk" x1="{_fmt(sx(lo))}" y1="{mid - 10}" x2="{_fmt(sx(lo))}" '
        f'y2="{mid + 10}"/><line class="whisk" x1="{_fmt(sx(hi))}" y1="{mid - 10}" '
        f'x2="{_fmt(sx(hi))}" y2="{mid + 10}"/>'
        f'<rect class="box" x="{_fmt(sx(q1))}" y="{mid - 22}" '
        f'width="{_fmt(max(sx(q3) - sx(q1), 1.0))}" height="44"><title>q1 {_e(seconds(q1))}, '
        f"q3 {_e(seconds(q3))}</title></rect>"
        f'<line class="med" x1="{_fmt(sx(med))}" y1="{mid - 22}" x2="{_fmt(sx(med))}" '
        f'y2="{mid + 22}"><title>median {_e(seconds(med))}</title></line>'
    )
    for i, t in enumerate(block_times_s):
        jitter = ((i * 0.6180339887) % 1.0 - 0.5) * 36
        parts.append(
            f'<circle class="dot" cx="{_fmt(sx(float(t)))}" cy="{_fmt(mid + jitter)}" r="2.6">'
            f"<title>block {i + 1}: {_e(seconds(float(t)))}</title></circle>"
        )
    parts.append(
        f'<text class="tick" x="{left}" y="146">per-call block averages, '
        f"{len(times)} blocks; box = q1-q3, line = median, whiskers = min-max</text></svg>"
    )
    return Markup("".join(parts))


_MARKERS = ("circle", "square", "diamond", "triangle")


def _marker(kind: str, x: float, y: float, cls: str) -> str:
    if kind == "square":
        return f'<rect class="{cls}" x="{_fmt(x - 4)}" y="{_fmt(y - 4)}" width="8" height="8"/>'
    if kind == "diamond":
        pts = f"{_fmt(x)},{_fmt(y - 5)} {_fmt(x + 5)},{_fmt(y)} {_fmt(x)},{_fmt(y + 5)} " + (
            f"{_fmt(x - 5)},{_fmt(y)}"
        )
        return f'<polygon class="{cls}" points="{pts}"/>'
    if kind == "triangle":
        pts = f"{_fmt(x)},{_fmt(y - 5)} {_fmt(x + 5)},{_fmt(y + 4)} {_fmt(x - 5)},{_fmt(y + 4)}"
        return f'<polygon class="{cls}" points="{pts}"/>'
    return f'<circle class="{cls}" cx="{_fmt(x)}" cy="{_fmt(y)}" r="4"/>'


# Width of one character of a tick label (class "tick": 11 px sans-serif), rounded up.
TICK_CHAR_PX = 7


@dataclass(frozen=True, slots=True)
class _Frame:
    """A line chart's geometry: categorical x positions, a y axis from 0 to ``y_max``."""

    width: int
    height: int
    left: int
    top: int
    plot_w: int
    plot_h: int
    y_max: float
    x_labels: Sequence[str]
    index: dict[str, int]

    def sx(self, x: str) -> float:
        if len(self.x_labels) <= 1:
            return self.left + self.plot_w / 2
        return self.left + self.index[x] * (self.plot_w / (len(self.x_labels) - 1))

    def sy(self, v: float) -> float:
        return self.top + self.plot_h - v / self.y_max * self.plot_h


def _frame(ticks: list[float], x_labels: Sequence[str], fmt: Callable[[float], str]) -> _Frame:
    # the left margin fits the longest y label ("1.20 k samples/s"): never clipped
    widest = max((len(fmt(tick)) for tick in ticks), default=0)
    width, left, right, top, bottom = 640, max(78, TICK_CHAR_PX * widest + 12), 120, 14, 40
    width += left - 78  # the plot keeps its width
    height = 240
    return _Frame(
        width,
        height,
        left,
        top,
        width - left - right,
        height - top - bottom,
        ticks[-1] or 1.0,
        x_labels,
        {x: i for i, x in enumerate(x_labels)},
    )


def _axes(frame: _Frame, ticks: list[float], fmt: Callable[[float], str], x_text: str) -> list[str]:
    """Grid lines with their y labels, the x labels and the x axis' title."""
    left, plot_w, height = frame.left, frame.plot_w, frame.height
    parts = []
    for tick in ticks:
        y = _fmt(frame.sy(tick))
        parts.append(
            f'<line class="grid" x1="{left}" y1="{y}" x2="{left + plot_w}" y2="{y}"/>'
            f'<text class="tick" x="{left - 6}" y="{_fmt(frame.sy(tick) + 4)}" text-anchor="end">'
            f"{_e(fmt(tick))}</text>"
        )
    for x in frame.x_labels:
        parts.append(
            f'<text class="tick" x="{_fmt(frame.sx(x))}" y="{height - 20}" text-anchor="middle">'
            f"{_e(x)}</text>"
        )
    parts.append(
        f'<text class="tick" x="{left + plot_w / 2:.0f}" y="{height - 4}" '
        f'text-anchor="middle">{_e(x_text)}</text>'
    )
    return parts


def _reference_line(frame: _Frame, reference: tuple[str, float]) -> str:
    left, plot_w = frame.left, frame.plot_w
    ref_y = _fmt(frame.sy(reference[1]))
    return (
        f'<line class="ref" x1="{left}" y1="{ref_y}" x2="{left + plot_w}" y2="{ref_y}" '
        f'stroke-dasharray="6 4"/><text class="lbl" x="{left + plot_w + 6}" '
        f'y="{_fmt(frame.sy(reference[1]) + 4)}">{_e(_short(reference[0]))}</text>'
    )


def _series(frame: _Frame, n: int, name: str, points: list[Point]) -> list[str]:
    """One series: its lines (broken at unavailable points), markers and legend entry."""
    cls = f"s{n % 6}"
    parts = []
    segment: list[str] = []
    segments: list[list[str]] = []
    for p in points:
        if p.value is None:
            if segment:
                segments.append(segment)
            segment = []
            continue
        segment.append(f"{_fmt(frame.sx(p.x))},{_fmt(frame.sy(p.value))}")
    if segment:
        segments.append(segment)
    for seg in segments:
        parts.append(f'<polyline class="ln {cls}" points="{" ".join(seg)}"/>')
    shape = _MARKERS[n % len(_MARKERS)]
    for p in points:
        if p.value is None:
            continue
        hollow = " hollow" if p.status != "complete" else ""
        parts.append(
            f"<g><title>{_e(name)}, {_e(p.x)}: {_e(p.title)}</title>"
            f"{_marker(shape, frame.sx(p.x), frame.sy(p.value), f'mk {cls}{hollow}')}</g>"
        )
    ly = frame.top + 14 + n * 20
    legend_x = frame.left + frame.plot_w
    parts.append(
        _marker(shape, legend_x + 18, ly - 4, f"mk {cls}")
        + f'<text class="lbl" x="{legend_x + 28}" y="{ly}">{_e(_short(name))}</text>'
    )
    return parts


def line_chart(
    series: dict[str, list[Point]],
    x_labels: Sequence[str],
    *,
    label: str,
    formatter: Callable[[float], str],
    x_text: str = "",
    reference: tuple[str, float] | None = None,
) -> Markup:
    """Lines over categorical x (e.g. thread counts), one series per precision, y from 0.

    Partial points are hollow markers (a lower bound); unavailable points are gaps.
    ``reference``: a labelled horizontal line (e.g. the owner's capacity), inside the y range.
    """
    values = [p.value for pts in series.values() for p in pts if p.value is not None]
    if reference is not None:
        values.append(reference[1])
    ticks = nice_ticks(0.0, max(values) if values else 1.0, 5)
    frame = _frame(ticks, x_labels, formatter)
    parts = [
        f'<svg class="chart" viewBox="0 0 {frame.width} {frame.height}" role="img" '
        f'aria-label="{_e(label)}">'
    ]
    parts += _axes(frame, ticks, formatter, x_text)
    if reference is not None:
        parts.append(_reference_line(frame, reference))
    for n, (name, points) in enumerate(series.items()):
        parts += _series(frame, n, name, points)
    parts.append("</svg>")
    return Markup("".join(parts))
