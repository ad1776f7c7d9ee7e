"""BenchmarkReport, ReportDiff and BenchmarkComparison views."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

from ..report import (
    BenchmarkComparison,
    BenchmarkReport,
    MetricDelta,
    MetricResult,
    PerformanceDelta,
    ReportDiff,
)
from .analysis_view import Chart, FlopsView, TotalView, flops_view
from .common import pretty, reason_for, setting_text
from .format import (
    DASH,
    Cell,
    human,
    humanize_text,
    metric_cell,
    plain_cell,
    seconds,
    thousands,
)
from .svg import bar_chart, latency_plot, metric_bar
from .verdicts import comparison_verdict, short_reason, statistic_text, verdict_label


@dataclass(slots=True)
class BenchmarkView:
    name: str | None
    execution: list[tuple[str, str]]
    latency: list[TotalView]
    latency_stats: list[tuple[str, Cell]]
    latency_info: list[tuple[str, str]]
    latency_chart: Markup | None
    memory: list[tuple[str, str, Cell]]
    memory_chart: Markup | None
    memory_baseline: list[tuple[str, Cell]]
    rss: list[TotalView]
    rss_info: list[tuple[str, str]]
    rss_phases: list[tuple[str, Cell]]
    rss_chart: Markup | None
    profile_note: str | None
    profile_rows: list[tuple[str, str, Cell, Cell, Cell, str]]
    profile_sort: str | None
    flops: FlopsView | None
    has_latency: bool
    has_memory: bool
    has_rss: bool
    has_profile: bool


def _total(report: BenchmarkReport, label: str, metric: str, result: MetricResult) -> TotalView:
    reason = None
    if result.status != "complete":
        reason = reason_for(report.diagnostics, metric) or "see diagnostics"
    return TotalView(label, metric_cell(result, reason=reason), result.status, reason)


def count_noun(count: float, unit: str) -> str:
    """``1 call``, ``8 samples``, ``2.5 samples``: a number with a correctly numbered unit."""
    if count == 1 and unit.endswith("s") and not unit.endswith("ss"):
        unit = unit[:-1]
    return f"{thousands(count)} {unit}"


def _work_per_call(report: BenchmarkReport) -> str:
    """The work one call does, and the input's name where the execution record has it (the
    pipeline records the input's work on memory, RSS and profile reports too)."""
    work = count_noun(report.work_units, report.unit)
    name = report.execution.input_name
    return f"{work} (input {name})" if name else work


def _threads(report: BenchmarkReport) -> tuple[str, str]:
    """RSS runs in a fresh child that sets its own threads: the parent's count is not it."""
    ex = report.execution
    in_process = any(
        getattr(report, name) is not None for name in ("latency", "memory", "profile", "flops")
    )
    if report.rss is None or in_process:
        return ("threads (intra-op / inter-op)", f"{ex.num_threads} / {ex.num_interop_threads}")
    if ex.threads is not None:  # what the pipeline configured, which the child applied
        return ("threads (intra-op, set in the measured child)", f"{ex.threads}")
    return ("threads", "set by the measured child process; not recorded")


def _execution_rows(report: BenchmarkReport) -> list[tuple[str, str]]:
    ex = report.execution
    inside = ex.workload_grad_enabled
    rows = [
        ("device", ex.device),
        ("precision", ex.precision or "not recorded"),
        _threads(report),
        ("gradients enabled (caller)", pretty(ex.grad_enabled)),
        (
            "gradients enabled (inside the workload)",
            "not observed" if inside is None else pretty(inside),
        ),
        ("training mode", pretty(ex.training)),
        ("work per call", _work_per_call(report)),
    ]
    rows += [
        (f"workload calls ({k} pass)", count_noun(v, "calls")) for k, v in sorted(ex.calls.items())
    ]
    return rows


_LATENCY_STATS = (
    ("median", "median"),
    ("q1", "q1"),
    ("q3", "q3"),
    ("IQR", "iqr"),
    ("min", "min"),
    ("max", "max"),
    ("mean", "mean"),
)


def host_rows(report: BenchmarkReport) -> list[tuple[str, str]]:
    """The host pressure the timing saw (provenance.host and the blocks' own CPU share)."""
    host = report.provenance.host
    rows: list[tuple[str, str]] = []
    if host is not None:
        rows.append(("host load average", f"{host.load_average_start} -> {host.load_average_end}"))
        found = host.pressure
        cores = found.usable_cpus if found and found.usable_cpus else host.logical_cpus
        niced = f" ({found.niced_busy_processes} niced)" if found else ""
        rows.append(("other busy processes", f"{host.busy_processes}{niced} on {cores} CPUs"))
        if found is not None:
            for label, value in (
                ("CPU pressure (PSI some, share of the timing)", found.psi_some_share),
                ("CPU pressure (PSI full, share of the timing)", found.psi_full_share),
                ("steal time", found.steal_share),
            ):
                if value is not None:
                    rows.append((label, f"{value * 100:.3g} %"))
            if found.psi_some_avg10 is not None:
                rows.append(
                    ("PSI some avg10 / avg60", f"{found.psi_some_avg10} / {found.psi_some_avg60} %")
                )
            if found.procs_running is not None:
                rows.append(("runnable tasks (system)", str(found.procs_running)))
            if found.other_cpu_cores is not None:
                rows.append(("CPU used by other processes", f"{found.other_cpu_cores:.2f} cores"))
    noise = report.latency.noise if report.latency is not None else None
    if noise is not None and noise.cpu_fraction is not None:
        rows.append(("workload CPU time / wall time", f"{noise.cpu_fraction:.3f}"))
    if noise is not None and noise.involuntary_switches is not None:
        rows.append(("involuntary context switches", str(noise.involuntary_switches)))
    return rows


def _latency_parts(report: BenchmarkReport) -> dict[str, Any]:
    lat = report.latency
    if lat is None:
        return {"latency": [], "latency_stats": [], "latency_info": [], "latency_chart": None}
    totals = [
        _total(report, "Warmed latency (median block average)", "warmed", lat.warmed),
        _total(report, "Throughput", "throughput", lat.throughput),
        _total(report, "First call", "first_call", lat.first_call),
    ]
    stats: list[tuple[str, Cell]] = []
    if (st := lat.stats) is not None:
        stats = [(label, plain_cell(getattr(st, key), "s")) for label, key in _LATENCY_STATS]
        stats += [
            ("blocks", plain_cell(st.blocks, "")),
            ("calls per block", plain_cell(st.calls_per_block, "")),
            ("warm-up calls", plain_cell(st.warmup_calls, "")),
            ("total timed", plain_cell(st.total_time_s, "s")),
        ]
    info = [("timer", lat.timer), ("device synchronised", pretty(lat.synchronized))]
    info += [(k, setting_text(k, v)) for k, v in sorted(lat.settings.items())]
    info += host_rows(report)
    chart = latency_plot(lat.block_times_s, lat.stats) if lat.block_times_s else None
    return {
        "latency": totals,
        "latency_stats": stats,
        "latency_info": info,
        "latency_chart": chart,
    }


def _memory_parts(report: BenchmarkReport) -> dict[str, Any]:
    mem = report.memory
    if mem is None:
        return {"memory": [], "memory_chart": None, "memory_baseline": []}
    rows: list[tuple[str, str, Cell]] = []
    for result in mem.results:
        reason = None
        if result.status != "complete":
            reason = reason_for(report.diagnostics, result.scope) or "see diagnostics"
        rows.append((result.scope, result.method, metric_cell(result, reason=reason)))
    bars = [metric_bar(r.scope, r) for r in mem.results if r.status != "unavailable"]
    missing = [r.scope for r in mem.results if r.status == "unavailable"]
    chart = None
    if bars or missing:
        chart = bar_chart(bars, label="peak memory by scope", missing=missing)
    baseline = [(k, plain_cell(v, "bytes")) for k, v in sorted(mem.baseline_bytes.items())]
    return {"memory": rows, "memory_chart": chart, "memory_baseline": baseline}


def _rss_parts(report: BenchmarkReport) -> dict[str, Any]:
    r = report.rss
    if r is None:
        return {"rss": [], "rss_info": [], "rss_phases": [], "rss_chart": None}
    info = [
        ("command", shlex.join(r.command)),
        ("exit code", pretty(r.exit_code)),
        ("wall time", seconds(r.wall_time_s)),
        ("timed out", pretty(r.timed_out)),
        ("timeout", seconds(r.timeout_s)),
    ]
    if r.method_detail:
        info.append(("method", humanize_text(r.method_detail)))
    bars = [metric_bar(p.name, p.peak_rss) for p in r.phases if p.peak_rss.status != "unavailable"]
    missing = [p.name for p in r.phases if p.peak_rss.status == "unavailable"]
    return {
        "rss": [_total(report, "Peak RSS (fresh child process)", "peak_rss", r.peak)],
        "rss_info": info,
        "rss_phases": [(p.name, metric_cell(p.peak_rss)) for p in r.phases],
        "rss_chart": bar_chart(bars, label="peak RSS per phase", missing=missing) if bars else None,
    }


def _profile_parts(report: BenchmarkReport) -> dict[str, Any]:
    prof = report.profile
    if prof is None:
        return {"profile_rows": [], "profile_note": None, "profile_sort": None}
    rows: list[tuple[str, str, Cell, Cell, Cell, str]] = []
    for op in prof.operators:
        device = (
            plain_cell(op.self_device_time_s, "s")
            if op.self_device_time_s is not None
            else Cell(DASH, "no device time recorded", "na")
        )
        shapes = "; ".join(op.input_shapes[:3]) + (" …" if len(op.input_shapes) > 3 else "")
        rows.append(
            (
                op.name,
                thousands(op.calls),
                plain_cell(op.self_cpu_time_s, "s"),
                plain_cell(op.cpu_time_total_s, "s"),
                device,
                shapes,
            )
        )
    return {"profile_rows": rows, "profile_note": prof.note, "profile_sort": prof.sort_by}


def benchmark_view(report: BenchmarkReport) -> BenchmarkView:
    """The page's view of one BenchmarkReport: one part per measurement pass."""
    return BenchmarkView(
        name=report.name,
        execution=_execution_rows(report),
        **_latency_parts(report),
        **_memory_parts(report),
        **_rss_parts(report),
        **_profile_parts(report),
        flops=flops_view(report.flops) if report.flops is not None else None,
        has_latency=report.latency is not None,
        has_memory=report.memory is not None,
        has_rss=report.rss is not None,
        has_profile=report.profile is not None,
    )


# ---------------------------------------------------------------------------- comparisons


@dataclass(slots=True)
class DeltaRow:
    metric: str
    before: Cell
    after: Cell
    delta: Cell
    ratio: str
    status: str


def _delta_row(metric: str, d: MetricDelta) -> DeltaRow:
    unit = d.before.unit
    if d.delta is None:
        delta = Cell(DASH, f"no numeric delta: status {d.status}", "na")
    else:
        sign = "+" if d.delta > 0 else ""
        delta = Cell(sign + human(d.delta, unit), f"{d.delta:,} {unit}", "ok")
    ratio = f"×{d.ratio:.3g}" if d.ratio is not None else DASH
    return DeltaRow(metric, metric_cell(d.before), metric_cell(d.after), delta, ratio, d.status)


@dataclass(slots=True)
class DiffView:
    before_model: str
    after_model: str
    same_env: bool | None
    env: list[tuple[str, str]]
    totals: list[DeltaRow]
    added: list[tuple[str, int, str]]
    removed: list[tuple[str, int, str]]
    changed: list[tuple[str, int, str, list[DeltaRow]]]


def diff_view(report: ReportDiff) -> DiffView:
    same = None
    if report.before_env_hash and report.after_env_hash:
        same = report.before_env_hash == report.after_env_hash
    return DiffView(
        before_model=report.before_model,
        after_model=report.after_model,
        same_env=same,
        env=[
            ("before environment hash", pretty(report.before_env_hash)),
            ("after environment hash", pretty(report.after_env_hash)),
        ],
        totals=[_delta_row(name, d) for name, d in report.totals.items()],
        added=[(k.path, k.call_index, k.type) for k in report.added],
        removed=[(k.path, k.call_index, k.type) for k in report.removed],
        changed=[
            (
                c.path,
                c.call_index,
                c.type_before
                if c.type_before == c.type_after
                else f"{c.type_before} → {c.type_after}",
                [_delta_row(name, d) for name, d in c.metrics.items()],
            )
            for c in report.changed
        ],
    )


@dataclass(slots=True)
class VerdictRow:
    """One line of the verdicts table (metric, ratio, interval, verdict, a short reason);
    ``details`` go behind a disclosure: the full reason, the statistic and the values."""

    metric: str
    how: str
    baseline: Cell
    candidate: Cell
    ratio: str
    ci: str
    verdict: str  # what the row shows, e.g. "slower (loaded host)"
    verdict_class: str  # the badge's class: the verdict itself
    withheld: bool
    reason: str  # the short reason (under ~100 characters), "" when there is none
    details: list[tuple[str, str]]


@dataclass(slots=True)
class ComparisonView:
    baseline_name: str
    candidate_name: str
    check_state: str  # passed | failed | not_performed | error
    check_rows: list[tuple[str, str]]
    rows: list[VerdictRow]
    withheld_count: int
    settings: list[tuple[str, str]]
    baseline: BenchmarkView | None
    candidate: BenchmarkView | None
    charts: list[Chart]
    verdict: tuple[str, str] | None  # (badge class, text) of its warmed-latency row


def _verdict_row(d: PerformanceDelta) -> VerdictRow:
    withheld = d.withheld or d.verdict == "withheld"
    ratio = f"×{d.ratio:.3g}" if d.ratio is not None else DASH
    ci = (
        f"[{d.ci_low:.3g}, {d.ci_high:.3g}]"
        if d.ci_low is not None and d.ci_high is not None
        else DASH
    )
    baseline, candidate = metric_cell(d.baseline), metric_cell(d.candidate)
    details = [
        ("statistic", statistic_text(d)),
        ("baseline → candidate", f"{baseline.text} → {candidate.text}"),
        ("unit · scope · method", f"{d.unit} · {d.scope} · {d.method}"),
    ]
    if d.confidence is not None and d.ci_low is not None:
        details.append(
            ("interval", f"{d.confidence * 100:g} % confidence, ratio candidate / baseline")
        )
    if d.reason:
        details.append(("reason in full", d.reason))
    return VerdictRow(
        metric=d.metric,
        how=f"{d.unit} · {d.scope} · {d.method}",
        baseline=baseline,
        candidate=candidate,
        ratio=ratio,
        ci=ci,
        verdict=verdict_label(d),
        verdict_class="withheld" if withheld else d.verdict,
        withheld=withheld,
        reason=short_reason(d.reason),
        details=details,
    )


def _compile_rows(report: BenchmarkComparison) -> list[tuple[str, str]]:
    """A compiled candidate's first call (compile + one run), apart from warmed latency."""
    record = report.compile
    if record is None:
        return []
    first = record.first_call
    seconds = f"{first.value:.3g} s" if first.value is not None else first.status
    return [
        (
            "compile first call",
            f"{seconds} · {record.backend} · {record.frames_compiled_first_call} frame(s) "
            f"compiled, {record.frames_compiled_after} after",
        )
    ]


def comparison_view(report: BenchmarkComparison) -> ComparisonView:
    check = report.check
    if check.error:
        state = "error"
    elif not check.performed:
        state = "not_performed"
    else:
        state = "passed" if check.passed else "failed"
    check_rows = [("performed", pretty(check.performed)), ("passed", pretty(check.passed))]
    if check.detail:
        check_rows.append(("detail", check.detail))
    if check.tolerance is not None:
        check_rows.append(("tolerance", json.dumps(check.tolerance, sort_keys=True, default=str)))
    if check.error:
        check_rows.append(("error", check.error))
    rows = [_verdict_row(d) for d in report.deltas]
    return ComparisonView(
        baseline_name=report.baseline_name or "baseline",
        candidate_name=report.candidate_name or "candidate",
        check_state=state,
        check_rows=check_rows,
        rows=rows,
        withheld_count=sum(1 for r in rows if r.withheld),
        settings=[(k, setting_text(k, v)) for k, v in sorted(report.settings.items())]
        + _compile_rows(report),
        baseline=benchmark_view(report.baseline) if report.baseline is not None else None,
        candidate=benchmark_view(report.candidate) if report.candidate is not None else None,
        charts=[],
        verdict=comparison_verdict(report.deltas),
    )
