"""The history page: steps first, then the headline metrics' charts, flat series folded.

Consumes the history report (``report.history.HistoryReport``, as
``torchscan_stages.history.history_document`` builds it or ``load_report`` reads it):
render never imports the history package. Like every page: no script, no fonts, no
network; every string is escaped here. Confident steps and suspect ones (resting on weak
points: "needs a quiet rerun", with the command) are listed apart; the charts come in the
order people read them (latency, throughput, peaks, FLOPs, then the rest), and series that
did not move over the range are folded under one disclosure. Each chart is
:mod:`.history_chart`; every point links to its commit's row in the commit table.
"""

from __future__ import annotations

from markupsafe import Markup, escape

from ..report import Status
from ..report.history import HistoryReport, HistorySeries, HistoryStep
from .history_chart import anchor, chart

_CSS = """
svg .band{fill:var(--s0);opacity:.16;stroke:none}
svg .brk{stroke:var(--err);stroke-width:1.5;stroke-dasharray:5 4}
svg .steprange{fill:var(--part);opacity:.14}
svg .steprange.suspect{fill:var(--na);opacity:.12}
svg .na{stroke:var(--na);stroke-width:2}
table.hist{border-collapse:collapse;margin:.6em 0;max-width:100%}
.hist td,.hist th{border:1px solid var(--line);padding:3px 7px;text-align:left;
vertical-align:top}.hist th{white-space:nowrap}.hist td.txt{overflow-wrap:anywhere}
.hist td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.hist pre{white-space:pre-wrap;overflow-wrap:anywhere;margin:.3em 0;font-size:.8rem}
tr:target{background:var(--info-bg)}
"""
_LATENCY = ("warmed_median_s", "throughput_per_s", "first_call_s")
_LEGEND = (
    "Filled: a clean point. Hollow: a point with a validity warning, without recorded "
    "evidence, or partial (a lower bound). x: unavailable. Hover a point for its warnings; "
    "a dashed line is a comparability break (lines never cross it); a shaded band is a "
    "step's commit range (grey: suspect)."
)


def _e(text: object) -> str:
    return str(escape(str(text)))


def _rank(series: HistorySeries) -> tuple[int, int, str]:
    """Headline metrics first: latency and throughput, peaks, FLOPs, then the rest."""
    name = series.name
    if name in _LATENCY:
        return (0, _LATENCY.index(name), series.metric)
    for rank, test in enumerate(
        (lambda n: n.startswith("peak_"), lambda n: "flops" in n or "macs" in n,
         lambda n: "parameters" in n, lambda n: n.endswith("_ratio")),
        start=1,
    ):  # fmt: skip
        if test(name):
            return (rank, 0, series.metric)
    return (9, 0, series.metric)


def is_flat(series: HistorySeries) -> bool:
    """No step and one value for every complete point (or none at all): nothing to read."""
    values = {p.value for p in series.points if p.status == "complete"}
    return not series.steps and len(values) <= 1


def _breakable(name: str) -> str:
    """A metric name that may wrap after ``/`` and ``_``, never mid-word."""
    return _e(name).replace("/", "/<wbr>").replace("_", "_<wbr>")


def _where(s: HistoryStep, p: str) -> str:
    commits = " ".join(f'<a href="#{anchor(c, p)}">{_e(c[:10])}</a>' for c in s.commits[:6])
    more = f" (+{len(s.commits) - 6})" if len(s.commits) > 6 else ""
    single = "one commit" if s.single_commit else "bisect to narrow"
    return f"{commits}{_e(more)} <span class='note'>({single})</span>"


def _ratio(s: HistoryStep) -> str:
    def num(x: float | None) -> str:
        return "unbounded" if x is None else f"{x:.4g}"

    return f"x{num(s.ratio)} [{num(s.ci_low)}, {num(s.ci_high)}]"


def _evidence(s: HistoryStep) -> str:
    if not s.suspect:
        return "confident (clean points)"
    rests = ", ".join(c[:10] for c in s.rests_on[:6])
    more = f" (+{len(s.rests_on) - 6})" if len(s.rests_on) > 6 else ""
    return (
        f"<b>suspect: needs a quiet rerun</b>; rests on weak point(s) at {_e(rests + more)} "
        f"({_e(', '.join(s.warnings))})<details><summary>rerun command</summary>"
        f"<pre>{_e(s.rerun or '')}</pre></details>"
    )


def _steps_table(steps: list[HistoryStep], p: str) -> str:
    if not steps:
        return "<p>No step in any series.</p>"
    ordered = sorted(steps, key=lambda s: s.suspect)  # confident ones first
    rows = []
    for s in ordered:
        beyond = {None: "not set", True: "yes", False: "no"}[s.beyond_min_effect]
        rows.append(
            f"<tr><td>{_breakable(s.metric)}</td><td>{_where(s, p)}</td>"
            f"<td class='num'>{_e(_ratio(s))}</td>"
            f"<td>{_e(s.direction)}{' (worse)' if s.worse else ''}</td>"
            f"<td class='txt'>{_evidence(s)}</td><td>{beyond}</td></tr>"
        )
    head = (
        "<tr><th>metric</th><th>commit range</th><th>ratio [interval]</th><th>direction</th>"
        "<th>evidence</th><th>beyond min effect</th></tr>"
    )
    return f"<table class='hist steps'><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>"


def _commits_table(report: HistoryReport, p: str) -> str:
    rows = [
        f"<tr id='{anchor(c.sha, p)}'><td class='num'>{i}</td><td class='mono'>{_e(c.sha)}</td>"
        f"<td class='txt'>{_e(c.subject)}</td></tr>"
        for i, c in enumerate(report.commits)
    ]
    head = "<tr><th>#</th><th>commit</th><th>subject</th></tr>"
    return (
        f"<table class='hist commits'><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _series_block(report: HistoryReport, n: int, series: HistorySeries, p: str, h: int) -> str:
    index = {c.sha: i for i, c in enumerate(report.commits)}
    parts = [
        f"<h{h} id='{p}m{n}'>{_e(series.metric)} ({_e(series.unit or 'no unit')})</h{h}>",
        str(chart(series, len(report.commits), index.__getitem__, p)),
    ]
    for segment in series.segments[1:]:
        first = report.commits[segment.start].sha
        link = f"<a href='#{anchor(first, p)}'>{_e(first[:10])}</a>"
        parts.append(
            f"<p class='chart-note'>Break before {link}: "
            f"{_e('; '.join(segment.change))} (a new segment; never joined)</p>"
        )
    return "".join(parts)


def _charts(report: HistoryReport, p: str, h: int) -> list[str]:
    ordered = sorted(enumerate(report.series), key=lambda item: _rank(item[1]))
    moving = [(n, s) for n, s in ordered if not is_flat(s)]
    flat = [(n, s) for n, s in ordered if is_flat(s)]
    parts = [f"<p class='note'>{_e(_LEGEND)}</p>"]
    parts += [_series_block(report, n, s, p, h) for n, s in moving]
    if flat:
        names = ", ".join(s.metric for _, s in flat)
        parts.append(
            f"<details class='flat'><summary>{len(flat)} series that did not change over "
            f"these commits: {_e(names)}</summary>"
            + "".join(_series_block(report, n, s, p, h) for n, s in flat)
            + "</details>"
        )
    return parts


def history_body(report: HistoryReport, p: str = "", h: int = 1) -> Markup:
    """The report's own sections under the page's header and status: the range and step
    counts, the steps, a chart per metric, the commits (ids under ``p``, headings from
    level ``h + 1``)."""
    suspect = sum(1 for s in report.steps if s.suspect)
    note = report.range_note
    parts = [
        f"<style>{_CSS}</style>",
        f"<p>{len(report.commits)} commits, {len(report.series)} series, "
        f"{len(report.steps) - suspect} confident step(s), {suspect} suspect (resting on weak "
        f"points: need a quiet rerun); {report.reports_read} full report(s) read from "
        "the DVC cache.</p>",
        f"<p class='note'>Range: {_e(note)}.</p>" if note else "",
        f"<h{h + 1} id='{p}steps'>Steps</h{h + 1}>",
        _steps_table(report.steps, p),
        f"<h{h + 1} id='{p}charts'>Metrics over commits</h{h + 1}>",
        *_charts(report, p, h + 2),
        f"<h{h + 1} id='{p}commits'>Commits</h{h + 1}>",
        _commits_table(report, p),
    ]
    return Markup("".join(parts))


def history_status(report: HistoryReport) -> Status:
    """complete when every point is clean, unavailable when none has a value, else partial."""
    points = [p for s in report.series for p in s.points]
    if not any(p.value is not None for p in points):
        return "unavailable"
    return "complete" if all(p.clean for p in points) else "partial"


def history_status_note(report: HistoryReport) -> str:
    """What the status means for a history (the generic words speak of lower bounds)."""
    points = [p for s in report.series for p in s.points]
    weak = sum(1 for p in points if p.status == "complete" and not p.clean)
    missing = sum(1 for p in points if p.status != "complete")
    suspect = sum(1 for s in report.steps if s.suspect)
    if not points:
        return "no metric was found in these commits."
    words = [f"{len(points) - weak - missing} of {len(points)} points are clean"]
    if weak:
        words.append(f"{weak} rest on weak evidence (a validity warning, or none recorded): "
                     "drawn hollow, never in a confident step")  # fmt: skip
    if missing:
        words.append(f"{missing} are partial or unavailable (hover for why)")
    if suspect:
        words.append(f"{suspect} suspect step(s) need a quiet rerun")
    return "; ".join(words) + "."


__all__ = ["history_body", "history_status", "history_status_note", "is_flat"]
