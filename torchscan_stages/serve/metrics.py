"""The flat metrics of a served report (``metrics/serve.json``): complete values only.

Names end in ``_s`` (seconds: lower is better) or ``_per_s`` (rates: higher is better), the
convention ``history`` reads directions from. ``METRIC_FIELDS`` maps each name to the
report field behind it, so history can find a partial value's lower bound in the report.
"""

from __future__ import annotations

from ..report import MetricResult, ServedReport

METRIC_FIELDS: dict[str, str] = {
    "latency_mean_s": "latency.mean",
    "latency_p50_s": "latency.p50",
    "latency_p90_s": "latency.p90",
    "latency_p99_s": "latency.p99",
    "queueing_p50_s": "queueing.p50",
    "service_p50_s": "service.p50",
    "achieved_per_s": "achieved_qps",
    "offered_per_s": "offered_qps",
    "ttft_p50_s": "tokens.ttft.p50",
    "tpot_p50_s": "tokens.tpot.p50",
    "tokens_per_s": "tokens.tokens_per_s",
}


def served_field(report: ServedReport, name: str) -> MetricResult | None:
    """The MetricResult behind metrics key ``name`` (None: not a served metric, or absent)."""
    path = METRIC_FIELDS.get(name)
    found: object = report
    for part in (path or "").split("."):
        found = getattr(found, part, None) if found is not None else None
    return found if path and isinstance(found, MetricResult) else None


def served_metrics(report: ServedReport) -> dict[str, float | int | None]:
    """Every served metric whose result is complete (None otherwise, left out when written)."""
    values: dict[str, float | int | None] = {}
    for name in METRIC_FIELDS:
        result = served_field(report, name)
        values[name] = result.value if result is not None and result.is_complete else None
    return values
