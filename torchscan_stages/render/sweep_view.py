"""Sweep view: latency and throughput against threads, one line per precision.

A report belongs to a sweep when its execution record holds the threads the pipeline
configured (``ExecutionRecord.threads``; the pipeline's timed stages record it, with the
precision), never from keys of the run's config.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from markupsafe import Markup, escape

from ..report import BenchmarkReport, MetricResult
from ..report.sweep import JobProvenance, SweepJob, SweepMetric, SweepSummary
from .caveats import caveat_cell, latency_caveats
from .format import Cell, human, metric_cell, seconds, si
from .svg import Point, line_chart


@dataclass(slots=True)
class SweepRow:
    precision: str
    threads: str
    name: str
    anchor: str
    latency: Cell
    throughput: Cell
    device: str


@dataclass(slots=True)
class SweepView:
    rows: list[SweepRow]
    latency_chart: Markup
    throughput_chart: Markup
    unit: str
    notes: list[str]


def sweep_key(report: BenchmarkReport) -> tuple[str, int] | None:
    """(precision, threads) of a sweep member: a timed report whose execution record holds
    the threads the pipeline configured; None for any other report."""
    execution = report.execution
    if report.latency is None or execution.threads is None:
        return None
    return execution.precision or "default", execution.threads


def _point(x: str, result: MetricResult, caveats: list[str] | None = None) -> Point:
    cell = caveat_cell(metric_cell(result), caveats or [])
    value = float(result.known_value) if result.known_value is not None else None
    return Point(x=x, value=value, status=result.status, title=cell.text)


def sweep_view(members: list[tuple[str, BenchmarkReport]]) -> SweepView | None:
    """``members`` are (anchor, report); needs at least two keyed benchmark reports."""
    keyed = [(anchor, r, key) for anchor, r in members if (key := sweep_key(r)) is not None]
    if len(keyed) < 2:
        return None
    keyed.sort(key=lambda item: (item[2][0], item[2][1]))
    threads = sorted({key[1] for _, _, key in keyed})
    x_labels = [str(t) for t in threads]
    latency: dict[str, list[Point]] = {}
    throughput: dict[str, list[Point]] = {}
    rows: list[SweepRow] = []
    units = set()
    devices = set()
    for anchor, report, (precision, count) in keyed:
        assert report.latency is not None  # sweep_key requires it
        caveats = latency_caveats(report)
        latency.setdefault(precision, []).append(_point(str(count), report.latency.warmed, caveats))
        throughput.setdefault(precision, []).append(
            _point(str(count), report.latency.throughput, caveats)
        )
        units.add(report.latency.throughput.unit)
        devices.add(report.execution.device)
        rows.append(
            SweepRow(
                precision=precision,
                threads=str(count),
                name=report.name or anchor,
                anchor=anchor,
                latency=caveat_cell(metric_cell(report.latency.warmed), caveats),
                throughput=caveat_cell(metric_cell(report.latency.throughput), caveats),
                device=report.execution.device,
            )
        )
    unit = units.pop() if len(units) == 1 else "mixed units"
    notes = [
        "Timing jobs that share one host disturb each other; compare points measured the "
        "same way, on an otherwise idle machine.",
    ]
    if len(devices) > 1:
        notes.append("These reports ran on different devices: " + ", ".join(sorted(devices)))
    if unit == "mixed units":
        notes.append("Throughput units differ between reports; the throughput chart mixes them.")
    return SweepView(
        rows=rows,
        latency_chart=line_chart(
            latency,
            x_labels,
            label="warmed latency against threads",
            formatter=seconds,
            x_text="threads",
        ),
        throughput_chart=line_chart(
            throughput,
            x_labels,
            label="throughput against threads",
            formatter=lambda v: si(v) if unit.endswith("/s") else human(v, unit),
            x_text="threads",
        ),
        unit=unit,
        notes=notes,
    )


# --- The sweep summary page: any set of jobs, failed ones included -------------------------

SWEEP_CSS = """
table.sweep{border-collapse:collapse;margin:1em 0}.sweep td,.sweep th{border:1px solid #ccc;
padding:3px 6px}.sweep tr.failed{background:#fde8e8}.sweep .err{color:#a00;font-family:monospace}
.failed-jobs{color:#a00}
"""
_MAX_CHARTS = 8


def _house_css() -> str:
    """The report pages' stylesheet (series colours, status classes), inlined: no network."""
    from pathlib import Path

    return (Path(__file__).parent / "templates" / "style.css").read_text(encoding="utf-8")


def _summary_cell(result: SweepMetric | None) -> Cell:
    """A table cell for one metric of the sweep table."""
    if result is None or result.status == "unavailable" or result.known_value is None:
        return Cell("—", "unavailable", "na")
    number = float(result.known_value)
    spread = result.spread
    extra = f"; IQR {spread.iqr:.3g} over {spread.blocks} blocks" if spread and spread.iqr else ""
    title = f"{result.scope}{extra}"
    shown = human(number, result.unit)
    if spread is not None and spread.iqr is not None and not result.caveats:
        shown += f" (IQR {human(spread.iqr, result.unit)})"  # an IQR of one block says nothing
    if result.status == "partial":
        return caveat_cell(Cell(f"≥ {shown}", f"lower bound; {title}", "part"), result.caveats)
    return caveat_cell(Cell(shown, title, "ok"), result.caveats)


def swept_axes(jobs: list[SweepJob]) -> list[str]:
    """Override keys whose value differs between jobs (all of them when none differs)."""
    known = [job.axes for job in jobs if job.axes]  # a job that never ran has none
    keys = sorted({k for axes in known for k in axes})
    varying = [k for k in keys if len({axes.get(k) for axes in known}) > 1]
    return varying or keys


def _x_axis(axes: list[str]) -> str | None:
    if not axes:
        return None
    return "threads" if "threads" in axes else axes[0]


def _charts(jobs: list[SweepJob], names: list[str], axes: list[str]) -> list[Markup]:
    """One line chart per metric: x = the first swept axis, one line per other setting."""
    x_key = _x_axis(axes)
    if x_key is None:
        return []
    # an x value only failed jobs have (crawl.mode=bogus) is not put on the axis: those jobs
    # are rows of the table and lines of the failure block; elsewhere a failure is a gap
    done = [j for j in jobs if j.status == "completed"]
    x_labels = sorted({j.axes.get(x_key, "") for j in done}, key=_natural)
    drawn = [j for j in jobs if j.axes.get(x_key, "") in x_labels]
    charts: list[Markup] = [_failed_note(jobs, axes)] if names else []
    for name in names[:_MAX_CHARTS]:
        series: dict[str, list[Point]] = {}
        for job in drawn:
            x = job.axes.get(x_key, "")
            others = [f"{k}={job.axes.get(k, '')}" for k in axes if k != x_key]
            label = ", ".join(others) or name
            series.setdefault(label, []).append(_job_point(job, x, job.metrics.get(name)))
        unit = next((r.unit for j in jobs if (r := j.metrics.get(name))), "")
        charts.append(Markup("<h3>{} ({})</h3>").format(name, unit or "no unit"))
        charts.append(
            line_chart(
                series, x_labels, label=name, x_text=x_key,
                formatter=_formatter(unit),
            )
        )  # fmt: skip
    return charts


def _failed_note(jobs: list[SweepJob], axes: list[str]) -> Markup:
    """Failed jobs are gaps or absent in the charts: name them above, marked failed."""
    failed = [j for j in jobs if j.status != "completed"]
    if not failed:
        return Markup("")
    items = []
    for job in failed[:20]:
        where = ", ".join(f"{k}={job.axes.get(k, '')}" for k in axes)
        error = job.error or "?"
        error = error if len(error) <= 160 else error[:159] + "…"  # the table has it whole
        items.append(f"job {job.job} ({where}) {job.status}: {error}")
    more = f"; … {len(failed) - 20} more (the table lists every job)" if len(failed) > 20 else ""
    return Markup('<p class="chart-note failed-jobs">Not drawn, {}: {}{}.</p>').format(
        f"{len(failed)} job(s) not completed", "; ".join(items), more
    )


def _formatter(unit: str) -> Callable[[float], str]:
    return lambda value: human(value, unit)


def _natural(text: str) -> tuple[int, float | str]:
    try:
        return (0, float(text))
    except ValueError:
        return (1, text)


def _job_point(job: SweepJob, x: str, result: SweepMetric | None) -> Point:
    if job.status != "completed" or result is None or result.known_value is None:
        why = job.error or "unavailable"
        return Point(x=x, value=None, status="unavailable", title=f"job {job.job}: {why}")
    cell = _summary_cell(result)
    return Point(x=x, value=float(result.known_value), status=result.status, title=cell.text)


def _row_html(job: SweepJob, axes: list[str], names: list[str]) -> str:
    failed = job.status != "completed"
    cells = [f"<td>{escape(job.job)}</td>"]
    cells += [f"<td>{escape(job.axes.get(a, ''))}</td>" for a in axes]
    cells.append(f"<td>{escape(job.status)}</td>")
    for name in names:
        cell = _summary_cell(job.metrics.get(name))
        title = escape(cell.title)
        cells.append(f'<td class="{cell.cls}" title="{title}">{escape(cell.text)}</td>')
    prov = job.provenance or JobProvenance()
    where = f"{job.host or ''} env {(prov.env_hash or '')[:12]}"
    shared = job.timing_jobs_on_host
    where += f"; timing jobs on host: {shared}" if shared is not None else ""
    cells.append(f"<td>{escape(where)} git {escape((prov.git_commit or '')[:10])}</td>")
    cells.append(f'<td class="err">{escape(job.error or "")}</td>')
    return f'<tr class="{"failed" if failed else ""}">{"".join(cells)}</tr>'


def sweep_body(summary: SweepSummary) -> Markup:
    """The summary's counts, table (every job) and charts, for its page and render_report."""
    jobs = summary.jobs
    axes = swept_axes(jobs)
    names = sorted({n for job in jobs for n in job.metrics})
    head = "".join(f"<th>{escape(h)}</th>" for h in ["job", *axes, "status", *names])
    head += "<th>where (host, env, git)</th><th>error</th>"
    rows = "".join(_row_html(job, axes, names) for job in jobs)
    charts = "".join(str(c) for c in _charts(jobs, names, axes))
    warning = (
        f"<p class='failed-jobs'>WARNING: {escape(summary.warning)}</p>" if summary.warning else ""
    )
    return Markup(
        f"{warning}<p>{len(jobs)} jobs, {len(summary.failed)} not completed. "
        f"{escape(summary.note)}</p>"
        f"<table class='sweep'><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"
        f"{charts}"
    )


def sweep_page(summary: SweepSummary) -> str:
    """Offline HTML (no script) for a sweep summary: table, charts, every job listed."""
    title = summary.title
    if summary.warning:
        title = f"{title} - WARNING: {summary.warning}"
    shown = escape(title)
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{shown}</title>"
        f"<style>{_house_css()}body{{padding:0 1rem}}{SWEEP_CSS}</style></head><body>"
        f"<h1>{shown}</h1>{sweep_body(summary)}</body></html>\n"
    )
