"""The served figures from the loop's records and LoadGen's trace (pure, injectable).

Per request i, matched by issue order (LoadGen's sample sequence) and checked by sample index:

* latency_i = LoadGen's ``complete_ns``: its scheduled arrival to the completion the loop
  reported (what MLPerf calls the sample's latency);
* queueing_i = LoadGen's issue delay (scheduled arrival to IssueQuery; also reported on its
  own) + the loop's wait (IssueQuery to the handler call's start);
* service_i = the handler call (start to return; a batch's requests share their call);
* token streams: TTFT_i = latency_i - (done_i - first_token_i) (both on the loop's clock, so
  LoadGen's arrival is kept), TPOT_i = (done_i - first_token_i) / (tokens_i - 1) (requests
  with one token have none), tokens/s_i = tokens_i / latency_i.

What is left of latency_i beyond queueing_i + service_i is the harness's completion overhead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..report import Diagnostic, MetricResult, ServedDistribution, ServedTokens
from .loadgen_log import TraceSample
from .percentiles import PERCENTILES, percentile_metric
from .server import RequestRecord

LATENCY = ("served_request_latency", "loadgen_trace")
QUEUEING = ("served_queueing_delay", "loadgen_trace_and_server_clock")
SERVICE = ("served_service_time", "server_clock")
ISSUE = ("served_issue_delay", "loadgen_trace")
TTFT = ("served_time_to_first_token", "loadgen_trace_and_server_clock")
TPOT = ("served_time_per_output_token", "server_clock")
TOKEN_RATE = ("served_output_tokens_per_request", "loadgen_trace_and_server_clock")


def distribution(
    values: Sequence[float], *, unit: str, scope: str, method: str
) -> ServedDistribution:
    """Mean, percentiles (status by the rule of :mod:`.percentiles`) and max of ``values``."""
    ordered = sorted(values)
    n = len(ordered)
    kw = {"unit": unit, "scope": scope, "method": method}
    if n == 0:
        empty = MetricResult.unavailable(**kw)
        return ServedDistribution(count=0, mean=empty, max=empty, **dict.fromkeys(_NAMES, empty))
    points = {name: percentile_metric(ordered, percent, **kw) for name, percent in PERCENTILES}
    return ServedDistribution(
        count=n,
        mean=MetricResult.complete(sum(ordered) / n, **kw),
        max=MetricResult.complete(float(ordered[-1]), **kw),
        **points,
    )


_NAMES = tuple(name for name, _ in PERCENTILES)


@dataclass(frozen=True)
class Matched:
    """Per-request seconds of the requests LoadGen traced and the loop served."""

    latency_s: list[float]
    queueing_s: list[float]
    service_s: list[float]
    issue_delay_s: list[float]
    records: list[RequestRecord]
    samples: list[TraceSample]
    diagnostics: list[Diagnostic]


def match(records: Sequence[RequestRecord], trace: Sequence[TraceSample]) -> Matched:
    """Pair records and trace samples by issue order; refuse pairs whose indices differ."""
    diagnostics = []
    if len(records) != len(trace):
        diagnostics.append(
            Diagnostic(
                code="served_trace_mismatch",
                metric="served.latency",
                message=f"LoadGen traced {len(trace)} sample(s), the server loop saw "
                f"{len(records)}; only the pairs in issue order with equal indices are used",
            )
        )
    latency, queueing, service, issue, kept, kept_trace = [], [], [], [], [], []
    for record, sample in zip(records, trace, strict=False):
        if record.index != sample.index or not record.served or record.done_ns < 0:
            continue
        latency.append(sample.latency_ns / 1e9)
        wait = max(0, record.started_ns - record.issued_ns)
        queueing.append((sample.issue_delay_ns + wait) / 1e9)
        service.append(max(0, record.done_ns - record.started_ns) / 1e9)
        issue.append(sample.issue_delay_ns / 1e9)
        kept.append(record)
        kept_trace.append(sample)
    dropped = min(len(records), len(trace)) - len(kept)
    if dropped:
        diagnostics.append(
            Diagnostic(
                code="served_requests_left_out",
                metric="served.latency",
                message=f"{dropped} request(s) left out: their sample index differs from "
                "LoadGen's in issue order, or the handler never served them",
                count=dropped,
            )
        )
    return Matched(latency, queueing, service, issue, kept, kept_trace, diagnostics)


def token_figures(matched: Matched) -> ServedTokens:
    """TTFT, TPOT and token rates of the matched streamed requests (see the module doc)."""
    ttft, tpot, rates = [], [], []
    tokens = 0
    for record, latency in zip(matched.records, matched.latency_s, strict=True):
        if record.tokens < 1 or record.first_token_ns < 0:
            continue
        tokens += record.tokens
        streaming = max(0, record.done_ns - record.first_token_ns) / 1e9
        ttft.append(max(0.0, latency - streaming))
        if record.tokens > 1:
            tpot.append(streaming / (record.tokens - 1))
        if latency > 0:
            rates.append(record.tokens / latency)
    span = run_span_s(matched.samples)
    unit = "tokens/s"
    aggregate = (
        MetricResult.complete(
            tokens / span, unit=unit, scope="served_output_tokens", method=LATENCY[1]
        )
        if span and tokens
        else MetricResult.unavailable(unit=unit, scope="served_output_tokens", method=LATENCY[1])
    )
    return ServedTokens(
        ttft=distribution(ttft, unit="s", scope=TTFT[0], method=TTFT[1]),
        tpot=distribution(tpot, unit="s", scope=TPOT[0], method=TPOT[1]),
        tokens_per_s_per_request=distribution(
            rates, unit=unit, scope=TOKEN_RATE[0], method=TOKEN_RATE[1]
        ),
        output_tokens=tokens,
        tokens_per_s=aggregate,
    )


def run_span_s(samples: Sequence[TraceSample]) -> float | None:
    """First scheduled arrival to last completion, in seconds (None for no sample)."""
    if not samples:
        return None
    first = min(s.scheduled_ns for s in samples)
    last = max(s.scheduled_ns + s.latency_ns for s in samples)
    return (last - first) / 1e9 if last > first else None


def achieved_qps(samples: Sequence[TraceSample]) -> MetricResult:
    """Completed requests per second: (n - 1) / span, LoadGen's own convention."""
    span = run_span_s(samples)
    kw = {"unit": "requests/s", "scope": "served_completed_rate", "method": LATENCY[1]}
    if span is None or len(samples) < 2:
        return MetricResult.unavailable(**kw)
    return MetricResult.complete((len(samples) - 1) / span, **kw)


def offered_qps(scenario: str, samples: Sequence[TraceSample]) -> MetricResult:
    """The arrival rate LoadGen scheduled: (n - 1) / (last - first arrival), server only.

    The other scenarios are closed loops (arrivals follow completions, or all at once): they
    offer no rate of their own, so theirs is unavailable.
    """
    kw = {"unit": "requests/s", "scope": "served_offered_rate", "method": "loadgen_schedule"}
    arrivals = sorted(s.scheduled_ns for s in samples)
    if scenario != "server" or len(arrivals) < 2 or arrivals[-1] <= arrivals[0]:
        return MetricResult.unavailable(**kw)
    return MetricResult.complete((len(arrivals) - 1) / ((arrivals[-1] - arrivals[0]) / 1e9), **kw)
