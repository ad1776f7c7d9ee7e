"""render_report and render_index: report models in, one self-contained HTML page out.

Loading and validating happen before any file is touched, so a malformed or unknown report
raises ValueError and leaves no output behind.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from .._gc import gc_paused
from .._version import __version__
from ..report import (
    REPORT_TYPES,
    AnalysisReport,
    AnyReport,
    BenchmarkReport,
    FlopReport,
    MetricResult,
    PredictionReport,
    ReportDiff,
    Status,
    check_output_path,
    load_report,
    write_output,
)
from .analysis_view import (
    LAZY_LAYERS,
    OPEN_DEPTH,
    analysis_charts,
    analysis_totals,
    build_tree,
    flops_view,
    layer_events,
)
from .bench_view import benchmark_view, comparison_view, diff_view
from .caveats import latency_caveats, prediction_caveats
from .common import (
    ProvenanceView,
    diagnostics_view,
    overall_status,
    provenance_view,
    shared_provenance,
)
from .format import describe_value, humanize_text, metric_cell
from .prediction_view import prediction_view
from .sweep_view import sweep_view
from .tree_data import RUN_MIN, script_json, tree_data

ReportSource = AnyReport | str | bytes | os.PathLike[str]

_KIND_LABEL = {
    "analysis": "Model cost analysis",
    "flops": "Operator FLOPs",
    "benchmark": "Workload benchmark",
    "report_diff": "Model cost comparison",
    "benchmark_comparison": "Benchmark comparison",
    "prediction": "Peak memory prediction",
}


@functools.lru_cache(maxsize=1)
def _environment() -> Environment:
    """Autoescape is on for every template: report strings can never become markup."""
    env = Environment(
        loader=PackageLoader("torchscan_stages.render", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.globals["metric_cell"] = metric_cell
    env.globals["humanize"] = humanize_text
    return env


def _load(source: object, argument: str) -> AnyReport:
    if isinstance(source, tuple(REPORT_TYPES.values())):
        return source  # type: ignore[return-value]
    if isinstance(source, (str, bytes, os.PathLike)):
        try:
            return load_report(source)
        except OSError as error:
            raise ValueError(f"{argument}: cannot read report {source!s}: {error}") from error
    raise TypeError(
        f"{argument} must be a report model, a path or JSON text, got {type(source).__name__}"
    )


@dataclass(slots=True)
class Headline:
    label: str
    result: MetricResult | None
    note: str = ""  # shown on the same line: a latency's warnings, a comparison's verdict


def _headlines(report: AnyReport) -> list[Headline]:
    if isinstance(report, AnalysisReport):
        t = report.totals
        return [
            Headline("parameters", t.parameters),
            Headline("module FLOPs", t.module_flops),
            Headline("operator FLOPs", t.operator_flops),
        ]
    if isinstance(report, FlopReport):
        return [Headline("operator FLOPs", report.total)]
    if isinstance(report, BenchmarkReport):
        heads: list[Headline] = []
        if report.latency is not None:
            caveats = latency_caveats(report)
            note = f"with warnings: {'; '.join(caveats)}" if caveats else ""
            heads += [
                Headline("warmed latency", report.latency.warmed, note),
                Headline("throughput", report.latency.throughput, note),
            ]
        if report.memory is not None:
            heads += [Headline(f"peak {r.scope}", r) for r in report.memory.results]
        if report.rss is not None:
            heads.append(Headline("peak RSS", report.rss.peak))
        if report.flops is not None:
            heads.append(Headline("operator FLOPs", report.flops.total))
        return heads
    if isinstance(report, ReportDiff):
        return [Headline(f"{name} after", d.after) for name, d in list(report.totals.items())[:3]]
    if isinstance(report, PredictionReport):
        # a CUDA target on a CPU-only run is on purpose (predict.device): say so on the line
        note = "CUDA's allocator, predicted on fake tensors: no GPU needed"
        cuda = report.device.startswith("cuda")
        codes = prediction_caveats(report)
        notes = ([note] if cuda else []) + ([f"with warnings: {', '.join(codes)}"] if codes else [])
        return [Headline(f"predicted peak ({report.device})", report.peak, "; ".join(notes))]
    # an info diagnostic naming a delta's metric (e.g. bf16 on a CPU without bf16 matrix
    # units: expect slower) is what a reader of that row needs beside the verdict
    infos: dict[str, list[str]] = {}
    for diag in report.diagnostics:
        if diag.severity == "info" and diag.metric:
            infos.setdefault(diag.metric, []).append(diag.message)
    return [
        Headline(
            f"{d.metric} candidate",
            d.candidate,
            "; ".join([_verdict_note(d), *infos.get(d.metric, [])]),
        )
        for d in report.deltas[:3]
    ]


def _verdict_note(delta: Any) -> str:
    """``ratio 1.27 (slower)``: the comparison's row says what the candidate's number means."""
    if delta.withheld or delta.verdict == "withheld":  # no ratio: never read as a gain or loss
        return f"withheld: {delta.reason}" if delta.reason else "withheld"
    ratio = f"ratio {delta.ratio:.3g}" if delta.ratio is not None else "no ratio"
    why = f": {delta.reason}" if delta.reason and delta.verdict in _UNDECIDED else ""
    return f"{ratio} ({str(delta.verdict).replace('_', ' ')}{why})"


# verdicts that say nothing about the candidate without their reason beside them
_UNDECIDED = frozenset({"inconclusive", "not_comparable"})


def _kind_label(report: AnyReport) -> str:
    """The kind, and for workload evidence which passes it holds (latency, memory, ...)."""
    label = _KIND_LABEL[report.kind]
    if isinstance(report, BenchmarkReport):
        passes = [
            name
            for name in ("latency", "memory", "rss", "profile", "flops")
            if getattr(report, name) is not None
        ]
        if passes:
            label += f" ({', '.join(passes)})"
    return label


def _status(report: AnyReport) -> Status:
    if isinstance(report, BenchmarkReport) and not _headlines(report) and report.profile:
        # a profile-only report has no headline number; its operators table is its evidence
        return "complete" if report.profile.operators else "unavailable"
    if isinstance(report, ReportDiff):
        states = {d.status for d in report.totals.values()}
        if not states or states == {"unavailable"}:
            return "unavailable"
        return "complete" if states == {"complete"} else "partial"
    return overall_status([h.result for h in _headlines(report)])


def _title(report: AnyReport) -> str:
    if isinstance(report, AnalysisReport):
        return report.model_type
    if isinstance(report, FlopReport | BenchmarkReport | PredictionReport):
        return report.name or _KIND_LABEL[report.kind]
    if isinstance(report, ReportDiff):
        return f"{report.before_model} → {report.after_model}"
    return f"{report.baseline_name or 'baseline'} vs {report.candidate_name or 'candidate'}"


@functools.lru_cache(maxsize=1)
def tree_script() -> str:
    """The inline script that draws a large layer tree (templates/tree.js)."""
    return _environment().loader.get_source(_environment(), "tree.js")[0]  # type: ignore[union-attr]


def _csp() -> str:
    """Content-Security-Policy of a page with the tree script: that script (by its hash) and
    inline styles, nothing else, so even a string that escaped escaping could not run."""
    digest = hashlib.sha256(tree_script().encode("utf-8")).digest()
    return (
        "default-src 'none'; style-src 'unsafe-inline'; "
        f"script-src 'sha256-{base64.b64encode(digest).decode('ascii')}'"
    )


def _lazy(report: AnyReport) -> bool:
    return isinstance(report, AnalysisReport) and len(report.layers) > LAZY_LAYERS


def _analysis_view(report: AnalysisReport) -> dict[str, Any]:
    """Static events for a small tree; compact data and the script for a large one."""
    storage, compute = analysis_totals(report)
    roots = build_tree(report.layers)
    lazy = _lazy(report)
    return {
        "storage": storage,
        "compute": compute,
        "charts": analysis_charts(report, roots),
        "events": [] if lazy else layer_events(report, roots),
        "tree_json": Markup(script_json(tree_data(report, roots, OPEN_DEPTH))) if lazy else None,
        "tree_script": Markup(tree_script()) if lazy else None,
        "lazy_layers": LAZY_LAYERS,
        "run_min": RUN_MIN,
        "layer_diagnostics": sum(1 for d in report.diagnostics if d.path is not None),
        "layer_count": len(report.layers),
        "inputs": describe_value(report.inputs, limit=300),
        "flops": flops_view(report.operator_flops) if report.operator_flops else None,
    }


def _view(report: AnyReport) -> dict[str, Any]:
    if isinstance(report, AnalysisReport):
        return _analysis_view(report)
    if isinstance(report, FlopReport):
        return {"flops": flops_view(report)}
    if isinstance(report, BenchmarkReport):
        return {"bench": benchmark_view(report)}
    if isinstance(report, ReportDiff):
        return {"diff": diff_view(report)}
    if isinstance(report, PredictionReport):
        return {"pred": prediction_view(report)}
    return {"cmp": comparison_view(report)}


def _section(
    report: AnyReport, prefix: str, *, level: int, prov: ProvenanceView | None = None
) -> Markup:
    """One report as an HTML <section>; ``prefix`` keeps ids unique on an index page;
    ``prov`` replaces the report's own provenance (an index page's per-report differences)."""
    template = _environment().get_template(f"{report.kind}.html")
    return Markup(
        template.render(
            r=report,
            v=_view(report),
            p=prefix,
            h=level,
            title=_title(report),
            kind_label=_kind_label(report),
            status=_status(report),
            heads=_headlines(report),
            diag=diagnostics_view(report.diagnostics, group_paths=_lazy(report)),
            prov=prov if prov is not None else provenance_view(report.provenance),
        )
    )


def _page(title: str, body: Markup, scripted: bool = False) -> str:
    """The whole page; ``scripted`` pages carry the tree script and a CSP that allows only it."""
    return (
        _environment()
        .get_template("page.html")
        .render(title=title, body=body, version=__version__, csp=_csp() if scripted else None)
    )


def _write(html: str, output: str | os.PathLike[str] | None) -> str:
    if output is not None:
        write_output(output, html)  # a path that cannot be written: ValueError naming it
    return html


def render_report(
    report_or_path: ReportSource, output: str | os.PathLike[str] | None = None
) -> str:
    """Render any report kind to one self-contained offline HTML page and return it.

    ``report_or_path`` is a report model, a path to a report JSON file, or JSON text. With
    ``output`` the page is also written atomically. A malformed or unknown report, or an
    ``output`` that is a directory or the input report itself, raises ``ValueError`` before
    anything is written.
    """
    check_output_path(output, [report_or_path], example="report.html")
    with gc_paused():  # a large page: half its time was collections
        report = _load(report_or_path, "report_or_path")
        html = _page(_title(report), _section(report, "r0-", level=1), scripted=_lazy(report))
    return _write(html, output)


@dataclass(slots=True)
class IndexEntry:
    anchor: str
    kind: str
    kind_label: str
    title: str
    status: Status
    heads: list[Headline]
    diagnostics: int


def render_index(
    reports_or_paths: Iterable[ReportSource],
    output: str | os.PathLike[str] | None = None,
    title: str = "torchscan_stages reports",
) -> str:
    """One page over several reports: an overview table, a sweep chart when the benchmark
    reports form a threads x precision sweep, then every report as its own section.

    Every input is loaded before anything is rendered or written.
    """
    if isinstance(reports_or_paths, (str, bytes, os.PathLike)):
        raise TypeError("reports_or_paths must be an iterable of reports or paths, not one path")
    sources = list(reports_or_paths)
    check_output_path(output, sources, example="report.html")
    with gc_paused():  # a large page: half its time was collections
        return _index(sources, output, title)


def _index(sources: list[ReportSource], output: str | os.PathLike[str] | None, title: str) -> str:
    reports: list[AnyReport] = []
    for number, source in enumerate(sources):
        reports.append(_load(source, f"reports_or_paths[{number}]"))
    if not reports:
        raise ValueError("reports_or_paths is empty: nothing to render")
    entries: list[IndexEntry] = []
    sections: list[Markup] = []
    bench: list[tuple[str, BenchmarkReport]] = []
    shared, provs = shared_provenance([r.provenance for r in reports], "provenance")
    for number, report in enumerate(reports, start=1):
        prefix = f"r{number}-"
        entries.append(
            IndexEntry(
                anchor=f"{prefix}top",
                kind=report.kind,
                kind_label=_kind_label(report),
                title=_title(report),
                status=_status(report),
                heads=_headlines(report)[:3],
                diagnostics=len(report.diagnostics),
            )
        )
        sections.append(_section(report, prefix, level=2, prov=provs[number - 1]))
        if isinstance(report, BenchmarkReport):
            bench.append((f"{prefix}top", report))
    sweep = sweep_view(bench)
    body = Markup(
        _environment()
        .get_template("index.html")
        .render(title=title, entries=entries, sweep=sweep, sections=sections, shared=shared)
    )
    return _write(_page(title, body, scripted=any(_lazy(r) for r in reports)), output)


def render_paths(paths: list[Path], output: Path, title: str | None = None) -> str:
    """One report → its own page; several → an index page (used by the CLI)."""
    if len(paths) == 1 and title is None:
        return render_report(paths[0], output)
    return render_index(paths, output, title=title or "torchscan_stages reports")
