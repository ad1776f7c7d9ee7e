"""The history page: one inline-SVG chart per metric over commits, steps first.

Consumes the history document (``torchscan_stages.history.history_document``, plain JSON):
render never imports the history package. Like every page: no script, no fonts, no
network; every string is escaped here. Complete points are filled markers with their
interval band; partial points are hollow (a lower bound, never fitted); unavailable points
are crosses on the axis with their reason; a comparability change (environment, model
revision, threads...) is a dashed break line, and each step's commit range is shaded.
Every point links to its commit's row in the commit table.
"""

from __future__ import annotations

from typing import Any

from markupsafe import Markup, escape

from .format import human
from .svg import nice_ticks

_CSS = """
svg .band{fill:var(--s0);opacity:.16;stroke:none}
svg .brk{stroke:var(--err);stroke-width:1.5;stroke-dasharray:5 4}
svg .steprange{fill:var(--part);opacity:.14}
svg .na{stroke:var(--na);stroke-width:2}
table.hist{border-collapse:collapse;margin:.6em 0}.hist td,.hist th{border:1px solid var(--line);
padding:3px 7px;text-align:left}.hist td.num{text-align:right;font-variant-numeric:tabular-nums}
tr:target{background:var(--info-bg)}
"""
_W, _LEFT, _RIGHT, _TOP, _BOTTOM, _H = 760, 82, 16, 14, 44, 250


def _e(text: object) -> str:
    return str(escape(str(text)))


def _f(x: float) -> str:
    return f"{x:.1f}"


def _short(sha: str) -> str:
    return sha[:10]


def _anchor(sha: str) -> str:
    return f"c-{sha[:12]}"


def _y_range(points: list[dict[str, Any]]) -> tuple[float, float]:
    values = [float(p[k]) for p in points for k in ("value", "low", "high") if p.get(k) is not None]
    if not values:
        return 0.0, 1.0
    low, high = min(values), max(values)
    pad = (high - low) * 0.08 or abs(high) * 0.05 or 1.0
    return low - pad, high + pad


def _chart(series: dict[str, Any], count: int) -> Markup:
    points: list[dict[str, Any]] = series["points"]
    unit = series["unit"]
    ticks = nice_ticks(*_y_range(points), 5)
    y0, y1 = ticks[0], ticks[-1]
    plot_w, plot_h = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM
    step = plot_w / max(count - 1, 1)

    def sx(index: float) -> float:
        return _LEFT + (index * step if count > 1 else plot_w / 2)

    def sy(value: float) -> float:
        return _TOP + plot_h - (value - y0) / ((y1 - y0) or 1.0) * plot_h

    out = [f'<svg class="chart" viewBox="0 0 {_W} {_H}" role="img" '
           f'aria-label="{_e(series["metric"])} over {count} commits">']  # fmt: skip
    for tick in ticks:
        out.append(
            f'<line class="grid" x1="{_LEFT}" y1="{_f(sy(tick))}" x2="{_LEFT + plot_w}" '
            f'y2="{_f(sy(tick))}"/><text class="tick" x="{_LEFT - 6}" y="{_f(sy(tick) + 4)}" '
            f'text-anchor="end">{_e(human(tick, unit))}</text>'
        )
    for s in series["steps"]:
        a, b = _index(points, s["before"]), _index(points, s["after"])
        title = (
            f"step x{s['ratio']:.3g} in {len(s['commits'])} commit(s) after {_short(s['before'])}"
        )
        out.append(
            f'<rect class="steprange" x="{_f(sx(a))}" y="{_TOP}" '
            f'width="{_f(max(sx(b) - sx(a), 2))}" '
            f'height="{plot_h}"><title>{_e(title)}</title></rect>'
        )
    out += _bands(series, sx, sy)
    for segment in series["segments"][1:]:
        x = (sx(points[segment["start"] - 1]["index"]) + sx(points[segment["start"]]["index"])) / 2
        what = "; ".join(segment["change"]) or "comparability changed"
        out.append(
            f'<g><title>new segment: {_e(what)}</title><line class="brk" x1="{_f(x)}" '
            f'y1="{_TOP}" x2="{_f(x)}" y2="{_TOP + plot_h}"/><text class="tick" x="{_f(x + 3)}" '
            f'y="{_TOP + 10}">{_e(_break_label(segment["change"]))}</text></g>'
        )
    out += _markers(points, unit, sx, sy, _TOP + plot_h)
    out.append(
        f'<text class="tick" x="{_LEFT + plot_w / 2:.0f}" y="{_H - 6}" text-anchor="middle">'
        f"commits, oldest to newest ({count}); filled = complete, hollow = partial (lower "
        "bound), x = unavailable</text></svg>"
    )
    return Markup("".join(out))


def _break_label(change: list[str]) -> str:
    fields = [c.split(":", 1)[0] for c in change]
    return "env changed" if "env" in fields else (", ".join(fields) or "break") + " changed"


def _index(points: list[dict[str, Any]], sha: str) -> int:
    return next(int(p["index"]) for p in points if p["commit"] == sha)


def _bands(series: dict[str, Any], sx: Any, sy: Any) -> list[str]:
    """One interval band per run of points that state an interval, inside one segment."""
    out = []
    points = series["points"]
    for segment in series["segments"]:
        run: list[dict[str, Any]] = []
        for p in [*points[segment["start"] : segment["stop"]], None]:
            if p is not None and p.get("low") is not None and p["status"] == "complete":
                run.append(p)
                continue
            if run:
                upper = [f"{_f(sx(q['index']))},{_f(sy(q['high']))}" for q in run]
                lower = [f"{_f(sx(q['index']))},{_f(sy(q['low']))}" for q in reversed(run)]
                if len(run) == 1:  # one point: a short vertical bar
                    x = sx(run[0]["index"])
                    upper = [
                        f"{_f(x - 3)},{_f(sy(run[0]['high']))}",
                        f"{_f(x + 3)},{_f(sy(run[0]['high']))}",
                    ]
                    lower = [
                        f"{_f(x + 3)},{_f(sy(run[0]['low']))}",
                        f"{_f(x - 3)},{_f(sy(run[0]['low']))}",
                    ]
                out.append(f'<polygon class="band" points="{" ".join(upper + lower)}"/>')
            run = []
    return out


def _markers(
    points: list[dict[str, Any]], unit: str, sx: Any, sy: Any, floor_y: float
) -> list[str]:
    out = []
    line: list[str] = []
    for p in points:
        if p["status"] == "complete" and p.get("value") is not None:
            line.append(f"{_f(sx(p['index']))},{_f(sy(p['value']))}")
    if line:
        out.append(f'<polyline class="ln s0" points="{" ".join(line)}"/>')
    for p in points:
        x = sx(p["index"])
        value = p.get("value")
        shown = human(float(value), unit) if value is not None else "no value"
        bound = "≥ " if p["status"] == "partial" else ""
        title = f"{_short(p['commit'])}: {p['status']} {bound}{shown}"
        if p.get("low") is not None:
            title += f" [{human(p['low'], unit)}, {human(p['high'], unit)}]"
        if p.get("note"):
            title += f"; {p['note']}"
        if p["status"] == "unavailable" or value is None:
            mark = f'<path class="na" d="M{_f(x - 4)},{_f(floor_y - 8)}l8,8m0,-8l-8,8"/>'
        else:
            hollow = " hollow" if p["status"] != "complete" else ""
            mark = f'<circle class="mk s0{hollow}" cx="{_f(x)}" cy="{_f(sy(value))}" r="3.5"/>'
        out.append(
            f'<a href="#{_anchor(p["commit"])}" class="pt pt-{_e(p["status"])}">'
            f"<title>{_e(title)}</title>{mark}</a>"
        )
    return out


def _steps_table(document: dict[str, Any]) -> str:
    steps = document["steps"]
    if not steps:
        return "<p>No confident step in any series.</p>"
    rows = []
    for s in steps:
        commits = " ".join(f'<a href="#{_anchor(c)}">{_e(_short(c))}</a>' for c in s["commits"][:6])
        more = f" (+{len(s['commits']) - 6})" if len(s["commits"]) > 6 else ""
        beyond = {None: "not set", True: "yes", False: "no"}[s["beyond_min_effect"]]
        rows.append(
            f"<tr><td>{_e(s['metric'])}</td><td>{commits}{_e(more)}</td>"
            f"<td>{'yes' if s['single_commit'] else 'no'}</td>"
            f"<td class='num'>x{s['ratio']:.4g} [{s['ci_low']:.4g}, {s['ci_high']:.4g}]</td>"
            f"<td>{_e(s['direction'])}{' (worse)' if s['worse'] else ''}</td><td>{beyond}</td></tr>"
        )
    head = (
        "<tr><th>metric</th><th>commit range</th><th>single commit</th>"
        "<th>ratio [interval]</th><th>direction</th><th>beyond min effect</th></tr>"
    )
    return f"<table class='hist steps'><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>"


def _commits_table(document: dict[str, Any]) -> str:
    rows = [
        f"<tr id='{_anchor(c['sha'])}'><td class='num'>{i}</td><td class='mono'>{_e(c['sha'])}</td>"
        f"<td>{_e(c['subject'])}</td></tr>"
        for i, c in enumerate(document["commits"])
    ]
    head = "<tr><th>#</th><th>commit</th><th>subject</th></tr>"
    return (
        f"<table class='hist commits'><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>"
    )


def history_body(document: dict[str, Any]) -> Markup:
    """The page body: summary and steps first, then a chart per metric, then the commits."""
    count = len(document["commits"])
    steps = document["steps"]
    parts = [
        f"<style>{_CSS}</style>",
        f"<p class='kind'>History</p><h1>{_e(document['rev_range'])}</h1>",
        f"<div class='status'><p>{count} commits, {len(document['series'])} series, "
        f"{len(steps)} confident step(s); {document.get('reports_read', 0)} full report(s) "
        "read from the DVC cache.</p></div>",
        "<h2 id='steps'>Steps</h2>",
        _steps_table(document),
        "<h2 id='charts'>Metrics over commits</h2>",
    ]
    for n, series in enumerate(document["series"]):
        parts.append(
            f"<h3 id='m{n}'>{_e(series['metric'])} ({_e(series['unit'] or 'no unit')})</h3>"
        )
        parts.append(str(_chart(series, count)))
        for segment in series["segments"][1:]:
            first = document["commits"][series["points"][segment["start"]]["index"]]["sha"]
            link = f"<a href='#{_anchor(first)}'>{_e(_short(first))}</a>"
            parts.append(
                f"<p class='chart-note'>Break before {link}: "
                f"{_e('; '.join(segment['change']))} (a new segment; never joined)</p>"
            )
    parts += ["<h2 id='commits'>Commits</h2>", _commits_table(document)]
    prov = document.get("provenance") or {}
    parts.append(
        "<details class='prov'><summary>Provenance</summary>"
        f"<pre>{_e(_prov_text(prov))}</pre></details>"
    )
    return Markup("".join(parts))


def _prov_text(prov: dict[str, Any]) -> str:
    keys = ("package_version", "torch_version", "env_hash")
    return "\n".join(f"{k}: {prov.get(k)}" for k in keys)


def history_page(document: dict[str, Any]) -> str:
    """The whole offline page of a history document."""
    from .html import _page  # the page every report kind shares (same package)

    return _page(f"History {document['rev_range']}", history_body(document))


__all__ = ["history_body", "history_page"]
