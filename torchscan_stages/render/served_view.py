"""``served`` and ``served_capacity`` views: percentile tables, the latency CDF, the
latency-vs-offered-load curve and LoadGen's verdict, read from the reports only.

The CDF is drawn from the raw per-request seconds the report keeps; the load curve is
the capacity search's points (offered rate on x, the bound as a dashed line).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

from ..report import ServedCapacity, ServedDistribution, ServedReport
from .format import Cell, metric_cell, seconds, si
from .svg import Point, line_chart, nice_ticks

_ROWS = ("mean", "p50", "p90", "p95", "p99", "p99_9", "max")
_CDF_POINTS = 400  # a CDF is drawn from at most this many steps per series


@dataclass(slots=True)
class DistributionRow:
    label: str
    count: int
    cells: list[Cell]


@dataclass(slots=True)
class ServedView:
    columns: list[str]
    rows: list[DistributionRow]
    rates: list[tuple[str, Cell]]
    validity: list[tuple[str, str]]
    reasons: list[str]
    cdf: Markup | None
    settings: list[tuple[str, str]]
    bound: float | None


def _row(label: str, found: ServedDistribution) -> DistributionRow:
    return DistributionRow(
        label, found.count, [metric_cell(getattr(found, name), brief=True) for name in _ROWS]
    )


def _flag(value: bool | None) -> str:
    return {True: "yes", False: "NO", None: "not reported"}[value]


def served_view(report: ServedReport) -> ServedView:
    rows = [
        _row("latency (arrival to completion)", report.latency),
        _row("queueing delay (arrival to handler start)", report.queueing),
        _row("service time (handler call)", report.service),
    ]
    if report.loadgen_issue_delay is not None:
        rows.insert(
            2,
            _row(
                "of which LoadGen's issue delay (arrival to IssueQuery)", report.loadgen_issue_delay
            ),
        )
    if report.tokens is not None:
        rows += [
            _row("time to first token", report.tokens.ttft),
            _row("time per output token", report.tokens.tpot),
            _row("output tokens/s per request", report.tokens.tokens_per_s_per_request),
        ]
    rates = [
        ("offered rate", metric_cell(report.offered_qps)),
        ("achieved rate", metric_cell(report.achieved_qps)),
    ]
    if report.tokens is not None:
        rates.append(("output tokens/s (aggregate)", metric_cell(report.tokens.tokens_per_s)))
    v = report.validity
    validity = [
        ("LoadGen's verdict", v.verdict or "not reported"),
        ("performance constraints met", _flag(v.perf_constraints_met)),
        ("minimum duration met", _flag(v.min_duration_met)),
        ("minimum queries met", _flag(v.min_queries_met)),
        ("early stopping met", _flag(v.early_stopping_met)),
    ]
    series = {"latency": report.latencies_s, "service time": report.service_s}
    settings = [(k, str(val)) for k, val in report.options.items()]
    settings.append(
        (
            "batches (mean size)",
            f"{report.batching.batches} ({report.batching.mean_batch or 0:.3g})",
        )
    )
    settings.append(("LoadGen", report.loadgen_version or "unknown"))
    return ServedView(
        columns=["mean", "p50", "p90", "p95", "p99", "p99.9", "max"],
        rows=rows,
        rates=rates,
        validity=validity,
        reasons=v.reasons + v.early_stopping + v.errors,
        cdf=cdf_chart(series, label="latency CDF", bound=_bound(report.options.get("bound_s"))),
        settings=settings,
        bound=_bound(report.options.get("bound_s")),
    )


def _bound(value: object) -> float | None:
    """The options' bound when it is a finite positive number (options are free-form)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and value > 0 else None


def cdf_chart(
    series: Mapping[str, Sequence[float]], *, label: str, bound: float | None = None
) -> Markup | None:
    """Empirical CDFs (share of requests at or under x seconds) as steps; None when empty."""
    kept = {name: sorted(values) for name, values in series.items() if values}
    if not kept:
        return None
    top = max(values[-1] for values in kept.values())
    if bound is not None:
        top = max(top, bound)
    ticks = nice_ticks(0.0, top or 1e-6, 5)
    width, height, left, right, top_px, bottom = 640, 240, 60, 120, 14, 40
    plot_w, plot_h = width - left - right, height - top_px - bottom
    x_max = ticks[-1] or 1.0

    def sx(x: float) -> float:
        return left + x / x_max * plot_w

    def sy(share: float) -> float:
        return top_px + plot_h - share * plot_h

    named = escape(label)
    parts = [f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" aria-label="{named}">']
    for share in (0.0, 0.5, 0.9, 0.99, 1.0):
        y = f"{sy(share):.1f}"
        parts.append(f'<line class="grid" x1="{left}" y1="{y}" x2="{left + plot_w}" y2="{y}"/>')
        if share != 0.99:  # its line only: its label would sit on 1's
            parts.append(
                f'<text class="tick" x="{left - 6}" y="{sy(share) + 4:.1f}" text-anchor="end">'
                f"{share:g}</text>"
            )
    for tick in ticks:
        parts.append(
            f'<text class="tick" x="{sx(tick):.1f}" y="{height - 20}" text-anchor="middle">'
            f"{escape(seconds(tick))}</text>"
        )
    parts.append(
        f'<text class="tick" x="{left + plot_w / 2:.0f}" y="{height - 4}" text-anchor="middle">'
        "seconds (share of requests at or under)</text>"
    )
    if bound is not None:
        x = f"{sx(bound):.1f}"
        parts.append(
            f'<line class="ref" x1="{x}" y1="{top_px}" x2="{x}" y2="{top_px + plot_h}" '
            f'stroke-dasharray="6 4"/><text class="lbl" x="{x}" y="{top_px + 10}">bound</text>'
        )
    for n, (name, values) in enumerate(kept.items()):
        points = _steps(values, sx, sy)
        parts.append(f'<polyline class="ln s{n % 6}" points="{points}"/>')
        parts.append(
            f'<text class="lbl" x="{left + plot_w + 6}" y="{top_px + 14 + 16 * n}">'
            f"{escape(name)}</text>"
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def _steps(ordered: list[float], sx: Callable[[float], float], sy: Callable[[float], float]) -> str:
    n = len(ordered)
    stride = max(1, n // _CDF_POINTS)
    coords = [(0.0, 0.0)]
    for index in range(0, n, stride):
        coords.append((ordered[index], index / n))
        coords.append((ordered[index], (index + 1) / n))
    coords.append((ordered[-1], 1.0))
    return " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in coords)


@dataclass(slots=True)
class CapacityView:
    capacity: Cell
    curve: list[tuple[str, Cell, Cell, Cell, str, str]]
    chart: Markup | None
    settings: list[tuple[str, str]]


def capacity_view(report: ServedCapacity) -> CapacityView:
    ordered = sorted(report.curve, key=lambda p: p.offered_qps)
    label = f"p{report.percentile:g}"
    rows = [
        (
            si(p.offered_qps, "requests/s"),
            metric_cell(p.achieved_qps, brief=True),
            metric_cell(p.latency_at_percentile, brief=True),
            metric_cell(p.p50, brief=True),
            {True: "under", False: "over", None: "not supported"}[p.under_bound],
            str(p.loadgen_verdict or "—"),
        )
        for p in ordered
    ]
    xs = [f"{p.offered_qps:.4g}" for p in ordered]

    def points(name: str) -> list[Point]:
        found = []
        for x, p in zip(xs, ordered, strict=True):
            result = p.latency_at_percentile if name == label else p.p50
            value = result.known_value
            found.append(
                Point(x, value, result.status, seconds(value) if value is not None else "—")
            )
        return found

    chart = (
        line_chart(
            {label: points(label), "p50": points("p50")},
            xs,
            label="latency vs offered load",
            formatter=seconds,
            x_text="offered requests/s",
            reference=("bound", report.bound_s),
        )
        if ordered
        else None
    )
    settings = [(k, str(v)) for k, v in report.options.items()]
    return CapacityView(metric_cell(report.capacity_qps), rows, chart, settings)
