"""``compare_served``: two saved ``served`` reports judged with latency's verdict rule.

Each side's p50 and p99 are the reports' own (LoadGen's index floor(n p)); the interval of
their ratio is a bootstrap of each side's raw per-request latencies resampled on its own
(the runs were not interleaved), floored like every saved comparison's, and the verdict is
:func:`.interleave.latency_verdict` with the owner's :class:`.deltas.Judge`. A side whose
percentile is not complete (too few requests) gives ``inconclusive``; runs under different
loads (scenario, offered rate, batching, bound) are ``not_comparable``: a served latency is
a property of the load as much as of the handler.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..provenance import build_provenance
from ..report import (
    BenchmarkComparison,
    CheckResult,
    Diagnostic,
    PerformanceDelta,
    ServedReport,
    report_of_kind,
)
from .deltas import Judge
from .interleave import latency_verdict, ratio_of_locations

PERCENTILES = (("p50", 50.0), ("p99", 99.0))
# settings that shape the load: two runs differing in one measured different loads
LOAD_SETTINGS = ("target_qps", "max_batch", "max_wait_s", "workers", "samples_per_query")
METHOD = "loadgen_trace_bootstrap"


def compare_served(
    baseline: ServedReport | str,
    candidate: ServedReport | str,
    *,
    judge: Judge | Mapping[str, Any] | None = None,
) -> BenchmarkComparison:
    """p50 and p99 of ``candidate`` against ``baseline`` (reports or their paths)."""
    base = report_of_kind(baseline, ServedReport, lambda got: _refusal("baseline", got))
    cand = report_of_kind(candidate, ServedReport, lambda got: _refusal("candidate", got))
    rule = Judge.from_mapping(judge)
    different = comparability(base, cand)
    deltas = [_delta(base, cand, name, percent, rule, different) for name, percent in PERCENTILES]
    diagnostics = []
    if base.provenance.env_hash != cand.provenance.env_hash:
        diagnostics.append(
            Diagnostic(
                code="environment_differs",
                severity="info",
                metric="served.latency",
                message="the two runs come from different environments (env_hash differs)",
            )
        )
    return BenchmarkComparison(
        provenance=build_provenance(include_runtime=False),
        baseline_name=base.name,
        candidate_name=cand.name,
        check=CheckResult(performed=False, passed=None, detail="saved served reports"),
        deltas=deltas,
        settings={**rule.settings(), "location": "served percentiles, bootstrap per side"},
        diagnostics=diagnostics,
    )


def _refusal(argument: str, got: object) -> str:
    return f"compare_served {argument} must be a served report or its path, got {got}"


def comparability(base: ServedReport, cand: ServedReport) -> list[str]:
    """What makes the two runs different loads, one line each (empty: comparable)."""
    found = []
    if base.scenario != cand.scenario:
        found.append(f"scenario differs: baseline={base.scenario}, candidate={cand.scenario}")
    for key in LOAD_SETTINGS:
        old, new = base.options.get(key), cand.options.get(key)
        if old != new:
            found.append(f"options {key} differs: baseline={old!r}, candidate={new!r}")
    return found


def _delta(
    base: ServedReport,
    cand: ServedReport,
    name: str,
    percent: float,
    rule: Judge,
    different: list[str],
) -> PerformanceDelta:
    before, after = getattr(base.latency, name), getattr(cand.latency, name)
    common = {
        "metric": f"served.latency.{name}",
        "unit": "s",
        "scope": before.scope,
        "method": METHOD,
        "baseline": before,
        "candidate": after,
    }
    if different:
        return PerformanceDelta(
            **common, ratio=None, verdict="not_comparable", reason="; ".join(different)
        )
    if not (before.is_complete and after.is_complete and before.value):
        why = f"{name} is not supported by enough requests on both sides (complete needed)"
        return PerformanceDelta(**common, ratio=None, verdict="inconclusive", reason=why)
    ratio = float(after.value) / float(before.value)
    estimate = ratio_of_locations(
        base.latencies_s,
        cand.latencies_s,
        level=percent / 100.0,
        confidence=rule.confidence,
        resamples=rule.resamples,
        paired=False,
        seed=rule.seed,
        floor=rule.ci_floor,
    )
    # the point is LoadGen's percentile; the interval the bootstrap's, widened to hold it
    estimate = replace(
        estimate, ratio=ratio, low=min(estimate.low, ratio), high=max(estimate.high, ratio)
    )
    verdict, reason = latency_verdict(estimate, min_effect=rule.min_effect)
    return PerformanceDelta(
        **common,
        ratio=ratio,
        ci_low=estimate.low,
        ci_high=estimate.high,
        confidence=estimate.confidence,
        verdict=verdict,  # type: ignore[arg-type]
        reason=reason,
    )
