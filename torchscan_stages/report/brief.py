"""``print(report)``: a few lines for a person, for every report kind.

``str(report)`` is its title (kind and name), its headline numbers, one line each with the
status marker, scope and method (the same line the workload printout uses), and the
diagnostics by severity with their codes. ``repr(report)`` stays pydantic's full form for
debugging. Each kind names its headline items in ``_BRIEFS`` below (read by attribute, so this
module needs no report model); a kind not listed shows its top-level MetricResults, so a new
kind prints sensibly from day one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

from pydantic import BaseModel

from .metric import Diagnostic, MetricResult, Severity
from .numbers import iec_bytes, metric_line

# a label and a MetricResult (one metric line), a text (one "label: text" line) or None (left
# out: a field the report does not carry)
BriefItem: TypeAlias = tuple[str, MetricResult | str | None]
_SEVERITIES: tuple[Severity, ...] = ("error", "warning", "info")
_CODES_SHOWN = 4


def brief_text(title: str, items: Sequence[BriefItem], diagnostics: Sequence[Diagnostic]) -> str:
    """The title line, one line per present item, then the diagnostics' summary line."""
    lines = [title]
    for label, item in items:
        if isinstance(item, MetricResult):
            lines.append(metric_line(label, item))
        elif item is not None:
            lines.append(f"  {label}: {item}")
    if diagnostics:
        lines.append(f"  diagnostics: {_diagnostics_summary(diagnostics)}")
    return "\n".join(lines)


def top_level_metrics(report: BaseModel) -> list[BriefItem]:
    """Every top-level MetricResult field, labelled by its name (the default items)."""
    return [
        (name.replace("_", " "), value)
        for name in type(report).model_fields
        if isinstance(value := getattr(report, name), MetricResult)
    ]


def ratio_interval(ratio: float | None, low: float | None, high: float | None) -> str:
    """``x1.23 [1.20, 1.26]``; ``x1.23`` without an interval; ``—`` without a ratio."""
    if ratio is None:
        return "—"
    if low is None or high is None:
        return f"x{ratio:.4g}"
    return f"x{ratio:.4g} [{low:.4g}, {high:.4g}]"


def _diagnostics_summary(diagnostics: Sequence[Diagnostic]) -> str:
    counts = Counter(d.severity for d in diagnostics)
    parts = []
    for severity in _SEVERITIES:
        if not counts[severity]:
            continue
        codes = list(dict.fromkeys(d.code for d in diagnostics if d.severity == severity))
        shown = ", ".join(codes[:_CODES_SHOWN]) + (", ..." if len(codes) > _CODES_SHOWN else "")
        parts.append(f"{counts[severity]} {severity} ({shown})")
    return "; ".join(parts)


def named(kind: str, name: Any) -> str:
    """``"prediction 'step'"`` or just the kind when the report has no name."""
    return f"{kind} {name!r}" if name else kind


def report_text(report: Any) -> str:
    """``str(report)`` of any report kind."""
    brief = _BRIEFS.get(report.kind)
    if brief is None:
        title, items = named(report.kind, getattr(report, "name", None)), top_level_metrics(report)
    else:
        title, items = brief(report)
    return brief_text(title, items, report.diagnostics)


def _flops(report: Any) -> tuple[str, list[BriefItem]]:
    return named("operator FLOPs", report.name), [
        ("all work", report.total),
        ("tensor products", report.product_flops),
        ("workload calls", str(report.workload_calls)),
    ]


def _analysis(report: Any) -> tuple[str, list[BriefItem]]:
    totals = report.totals
    title = f"model cost of {report.model_type} ({report.mode}, {len(report.layers)} layer records)"
    return title, [
        ("parameters", totals.parameters),
        ("parameter bytes", totals.parameter_bytes),
        ("module FLOPs", totals.module_flops),
        ("MACs", totals.macs),
        ("operator FLOPs", totals.operator_flops),
    ]


def _benchmark(report: Any) -> tuple[str, list[BriefItem]]:
    execution = report.execution
    where = f"{execution.device}, {execution.num_threads} threads"
    if execution.precision:
        where += f", {execution.precision}"
    items: list[BriefItem] = []
    if report.latency is not None:
        items += [
            ("first call", report.latency.first_call),
            ("warmed median (block average)", report.latency.warmed),
            (f"throughput ({report.unit})", report.latency.throughput),
        ]
    if report.memory is not None:
        items += [(f"peak ({result.scope})", result) for result in report.memory.results]
    if report.rss is not None:
        items.append(("peak RSS (fresh child)", report.rss.peak))
    if report.flops is not None:
        items.append(("operator FLOPs", report.flops.total))
    if report.profile is not None:
        items.append(("profiled operators", f"{len(report.profile.operators)} (instrumented)"))
    return f"{named('workload', report.name)} on {where}", items


def _report_diff(report: Any) -> tuple[str, list[BriefItem]]:
    items: list[BriefItem] = [
        (name, f"{delta.before.value} -> {delta.after.value} ({delta.status})")
        for name, delta in report.totals.items()
    ]
    layers = f"{len(report.added)} added, {len(report.removed)} removed, {len(report.changed)}"
    items.append(("layers", f"{layers} changed"))
    return f"model cost diff: {report.before_model} -> {report.after_model}", items


def _comparison(report: Any) -> tuple[str, list[BriefItem]]:
    check = report.check
    if not check.performed:
        outcome = "not performed (saved reports)"
    else:
        outcome = "passed" if check.passed else "FAILED: every delta is withheld"
    items: list[BriefItem] = [
        ("output check", outcome + (f"; {check.detail}" if check.detail else ""))
    ]
    for delta in report.deltas:
        shown = ratio_interval(delta.ratio, delta.ci_low, delta.ci_high)
        items.append((delta.metric, f"{delta.verdict} {shown} (candidate / baseline)"))
    sides = f"{report.candidate_name or 'candidate'} vs {report.baseline_name or 'baseline'}"
    return f"comparison: {sides}", items


def _prediction(report: Any) -> tuple[str, list[BriefItem]]:
    steady = report.headline == "steady_state_peak" and report.steady_state_peak is not None
    headline = report.steady_state_peak if steady else report.peak
    label = "peak, steady state" if steady else "peak"
    items: list[BriefItem] = [(label, headline)]
    if steady:
        items.append(("peak, first step", report.first_step_peak))
    items.append(("resident before the step", report.resident_bytes))
    if report.capacity_bytes is not None:
        decision = {True: "yes", False: "no", None: "cannot tell"}[report.fits]
        resident = report.resident_bytes.known_value if report.resident_bytes else 0
        items.append(
            (
                f"fits in {iec_bytes(report.capacity_bytes)}",
                f"{decision} ({label} + {iec_bytes(resident or 0)} resident, against the capacity)",
            )
        )
    where = report.device
    if report.world_size is not None:
        sharding = report.sharding or "ddp"
        where += f", rank {report.rank} of {report.world_size} ({sharding})"
    return f"{named('predicted peak memory', report.name)} on {where}", items


def _evidence(report: Any) -> tuple[str, list[BriefItem]]:
    """One line per metrics key: its status, and why it is not a full point when it is not."""
    items: list[BriefItem] = []
    for key, found in sorted(report.metrics.items()):
        text = found.status + (
            f" with warnings: {', '.join(found.warnings)}" if found.warnings else ""
        )
        if found.verdict is not None:
            text += f"; verdict {found.verdict}"
        items.append((key, text + ("" if found.clean else " (weak point)")))
    return f"evidence behind metrics/{report.stage}.json", items


def _sweep(report: Any) -> tuple[str, list[BriefItem]]:
    """The job count, each job that did not complete (five at most) and the overlap warning."""
    failed = report.failed
    items: list[BriefItem] = [("jobs", f"{len(report.jobs)}, {len(failed)} not completed")]
    items += [(f"job {job.job}", f"{job.status}: {job.error or '?'}") for job in failed[:5]]
    items.append(("warning", report.warning))
    return f"sweep summary {report.title!r}", items


def _job_status(report: Any) -> tuple[str, list[BriefItem]]:
    shared = report.timing_jobs_on_host
    return f"sweep job {report.status}", [
        ("error", report.error),
        ("host", report.host),
        ("timing jobs on host", None if shared is None else str(shared)),
    ]


def _environment(report: Any) -> tuple[str, list[BriefItem]]:
    env = report.provenance.environment
    return f"environment {report.provenance.env_hash}", [
        ("torch", env.torch_version),
        ("python", f"{env.python_implementation} {env.python_version} on {env.platform}"),
        ("cpu", f"{env.cpu_model} ({env.cpu_count_logical} logical)"),
        ("accelerators", ", ".join(env.accelerators) or None),
    ]


def _sources(report: Any) -> tuple[str, list[BriefItem]]:
    items: list[BriefItem] = []
    for name, entry in report.sources.items():
        hashed = f"sha256 {entry.sha256[:16]} over {entry.files} file(s)" if entry.sha256 else None
        items.append((name, f"{entry.target}: {hashed or entry.source or 'not hashed'}"))
        items += [(f"{name} skipped", note) for note in entry.skipped]
    return "source fingerprints", items


_BRIEFS: dict[str, Callable[[Any], tuple[str, list[BriefItem]]]] = {
    "flops": _flops,
    "analysis": _analysis,
    "benchmark": _benchmark,
    "report_diff": _report_diff,
    "benchmark_comparison": _comparison,
    "prediction": _prediction,
    "metrics_evidence": _evidence,
    "sweep_summary": _sweep,
    "job_status": _job_status,
    "environment": _environment,
    "sources": _sources,
}
