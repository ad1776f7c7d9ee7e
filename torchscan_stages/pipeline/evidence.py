"""The evidence behind each committed metrics key (``metrics/<stage>.evidence.json``).

``metrics/<stage>.json`` holds bare numbers for ``dvc metrics diff``; a number there looks
the same whether its report said "complete" or "complete with warnings: 1 block(s) < min 7;
loaded host". The sidecar (report kind ``metrics_evidence``, :mod:`..report.evidence`) keeps,
per key, the value's status and its validity warning codes (the report's warning
diagnostics for that metric: ``too_few_blocks``, ``timing_backstop``, ``loaded_host``,
``latency_noisy``, ``host_too_busy``, ``too_few_rounds`` ...) and, for a comparison's keys,
the row's verdict and its interval only when that verdict is confident (never for a
verdict given on a loaded host: its direction is sure, its size includes the load's). It is
committed beside the metrics (DVC ``cache: false``), so ``history`` and a reader of the
metrics diff can weigh a point without the DVC cache.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..report import BenchmarkComparison, Diagnostic, MetricResult, PerformanceDelta
from ..report.evidence import MetricEvidence

CONFIDENT = ("slower", "faster", "no_difference")  # verdicts decided from an interval


def warning_codes(diagnostics: Iterable[Diagnostic], prefixes: Iterable[str]) -> list[str]:
    """Sorted codes of the warning/error diagnostics about a metric named by ``prefixes``."""
    names = tuple(prefixes)
    return sorted(
        {
            d.code
            for d in diagnostics
            if d.severity in ("warning", "error") and d.metric and d.metric.startswith(names)
        }
    )


def evidence_of(result: MetricResult | None, warnings: Iterable[str] = ()) -> MetricEvidence:
    """One key's evidence from the result it was taken from (None: no result at all)."""
    status = result.status if result is not None else "unavailable"
    found = sorted(set(warnings))
    note = f"{status} with warnings: {', '.join(found)}" if found else None
    return MetricEvidence(status=status, warnings=found, note=note)


def delta_evidence(delta: PerformanceDelta, diagnostics: Iterable[Diagnostic]) -> MetricEvidence:
    """A comparison row's evidence: its verdict, its interval only when that verdict is
    confident, and the warnings behind it (an inconclusive row is never a full point)."""
    family = delta.metric.split(".")[0]
    # throughput is work / warmed latency: the latency's warnings are its own
    names = (delta.metric, f"{family}.", *(("latency.warmed",) if family == "throughput" else ()))
    codes = set(warning_codes(diagnostics, names))
    if delta.reason and delta.reason.startswith("fewer than"):
        codes.add("too_few_rounds")
    if delta.verdict == "inconclusive":
        codes.add("inconclusive")
    # a verdict on a loaded host is sure of its direction, not of its size: no interval
    loaded = (delta.reason or "").startswith("loaded host")
    confident = delta.verdict in CONFIDENT and not delta.withheld and not loaded
    interval = None
    if confident and delta.ci_low is not None and delta.ci_high is not None:
        interval = (delta.ci_low, delta.ci_high)
    note = None
    if loaded:
        note = f"{delta.verdict} on a loaded host: the direction is sure, the size is not"
    elif not confident and delta.verdict not in ("increased", "decreased"):
        note = f"{delta.verdict}: {(delta.reason or '').split('; ')[0][:200]}"
    return MetricEvidence(
        status="complete",
        warnings=sorted(codes),
        verdict=delta.verdict,
        interval=interval,
        note=note,
    )


def comparison_evidence(comparison: BenchmarkComparison) -> dict[str, MetricEvidence]:
    """Evidence for the compare stage's ``<metric>_ratio`` keys (candidate.py's names)."""
    return {
        f"{delta.metric.replace('.', '_')}_ratio": delta_evidence(delta, comparison.diagnostics)
        for delta in comparison.deltas
        if delta.ratio is not None and not delta.withheld
    }


def keys_evidence(
    values: Mapping[str, Any], given: Mapping[str, MetricEvidence] | None
) -> dict[str, MetricEvidence]:
    """Every key of a stage's metrics: the stage's own evidence, else complete for a value
    and unavailable for a missing one (a value left out of the metrics file as incomplete)."""
    out: dict[str, MetricEvidence] = {}
    for key in sorted(values):
        found = (given or {}).get(key)
        if found is None:
            status = "complete" if values[key] is not None else "unavailable"
            found = MetricEvidence(status=status)
        out[key] = found
    return out
