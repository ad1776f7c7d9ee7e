"""Plain text for people: MetricResults, ratios, intervals, diagnostics and tables.

One formatter for every terminal and Markdown surface (the workload printout, the compare
gate and the analysis summary), so a number reads the same everywhere.
Number formatting itself comes from :mod:`render.format`, which the HTML uses too: this
module only arranges text. Incomplete results never print as a number: partial shows
``≥ lower bound``, unavailable shows a dash.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..report import STATUS_MARKERS, BenchmarkReport, Diagnostic, MetricResult

# the MetricResult lines live on the ground floor (report/numbers.py), shared with print(report)
from ..report.numbers import metric_line as metric_line
from ..report.numbers import metric_text as metric_text
from .caveats import latency_caveats, status_text
from .format import DASH, seconds

MARKERS = STATUS_MARKERS  # defined once, beside the statuses (progress lines use it too)


def compact_number(value: float | int) -> str:
    """Dense table style for counts: ``1.20M``, ``3.5k``, ``0.123`` (the summary's columns)."""
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.3g}"
    value = int(value)
    for threshold, suffix in ((10**12, "T"), (10**9, "G"), (10**6, "M"), (10**3, "k")):
        if abs(value) >= threshold:
            return f"{value / threshold:.2f}{suffix}"
    return str(value)


def compact_metric(result: MetricResult) -> str:
    """``1.20M`` when complete, ``>=1.20M`` when partial (lower bound), ``n/a`` when unavailable."""
    if result.status == "complete" and result.value is not None:
        return compact_number(result.value)
    if result.status == "partial" and result.known_value is not None:
        return ">=" + compact_number(result.known_value)
    return "n/a"


def ratio_text(value: float | None) -> str:
    """A ratio with four significant decimals (``'1.3000'``), or a dash."""
    return DASH if value is None else f"{value:.4f}"


def interval_text(low: float | None, high: float | None) -> str:
    """``'[1.2935, 1.3065]'`` or a dash when there is no interval."""
    if low is None or high is None:
        return DASH
    return f"[{ratio_text(low)}, {ratio_text(high)}]"


def diagnostic_text(diagnostic: Diagnostic, *, markdown: bool = False) -> str:
    """``code (severity) [metric]: message``; the code in backticks for Markdown."""
    code = f"`{diagnostic.code}`" if markdown else diagnostic.code
    where = f" [{diagnostic.metric}]" if diagnostic.metric else ""
    return f"{code} ({diagnostic.severity}){where}: {diagnostic.message}"


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A GitHub Markdown table; ``|`` inside cells is escaped."""

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"

    return [line(headers), "| " + " | ".join("---" for _ in headers) + " |"] + [
        line(row) for row in rows
    ]


# ------------------------------------------------------------------ BenchmarkReport printout


def _grad_text(caller: bool, workload: bool | None) -> str:
    """Grad mode as the workload's operators saw it, when a pass observed it."""
    if workload is None:
        return f"{'on' if caller else 'off'} (caller; the workload's own mode not observed)"
    return f"{'on' if workload else 'off'} (observed in the workload)"


def _latency_lines(report: BenchmarkReport) -> list[str]:
    lat = report.latency
    if lat is None:
        return []
    extra = ""
    stats = lat.stats
    if stats is not None:
        spread = (
            f"IQR/median {stats.relative_iqr:.2%}, "
            if stats.relative_iqr is not None
            else "spread not judged, "
        )
        extra = spread + f"{stats.blocks} blocks x {stats.calls_per_block} calls"
    caveats = latency_caveats(report)
    warning = f"  ! {status_text(lat.warmed.status, caveats)}" if caveats else ""
    return [
        metric_line("first-call latency", lat.first_call),
        metric_line("warmed latency (median)", lat.warmed, extra + warning),
        metric_line("throughput", lat.throughput, warning.lstrip()),
    ]


def _other_lines(report: BenchmarkReport) -> list[str]:
    lines: list[str] = []
    if report.memory is not None:
        lines += [metric_line(f"peak {r.scope}", r) for r in report.memory.results]
    if report.flops is not None:
        lines.append(metric_line("operator FLOPs (one call)", report.flops.total))
        if report.flops.product_flops is not None:
            lines.append(metric_line("  of which tensor products", report.flops.product_flops))
    if report.profile is not None:
        prof = report.profile
        lines.append(f"  [instrumented] profiler, top operators by {prof.sort_by} (not latency):")
        lines += [
            f"      {op.name:<32} calls {op.calls:<5} self CPU {seconds(op.self_cpu_time_s)}"
            for op in prof.operators[:5]
        ]
    if report.rss is not None:
        rss = report.rss
        extra = f"exit {rss.exit_code}, {seconds(rss.wall_time_s)}"
        lines.append(metric_line("peak RSS (fresh process)", rss.peak, extra))
        lines += [metric_line(f"  phase {p.name}", p.peak_rss) for p in rss.phases]
    return lines


def benchmark_summary(report: BenchmarkReport) -> str:
    """A person-readable summary of a BenchmarkReport (never parse it: use the JSON)."""
    ex = report.execution
    lines = [
        f"BenchmarkReport {report.name or '(unnamed)'}: device {ex.device}, threads "
        f"{ex.num_threads} (interop {ex.num_interop_threads}), grad "
        f"{_grad_text(ex.grad_enabled, ex.workload_grad_enabled)}, "
        f"precision {ex.precision or 'not declared'}, "
        f"training {'not declared' if ex.training is None else ex.training}",
        f"  one call = {report.work_units:g} {report.unit}; workload calls per pass: "
        + (", ".join(f"{k}={v}" for k, v in ex.calls.items()) or "none"),
    ]
    lines += _latency_lines(report) + _other_lines(report)
    if report.diagnostics:
        lines.append("  diagnostics:")
        lines += [f"    ! {diagnostic_text(d)}" for d in report.diagnostics]
    lines.append("  scopes differ and are never summed; JSON is the machine interface")
    return "\n".join(lines)
