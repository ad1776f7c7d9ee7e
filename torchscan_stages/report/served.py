"""The ``served`` and ``served_capacity`` report kinds: latency under load, capacity at a bound.

Served figures are per request under a load LoadGen generated (scope ``served_*``); they are
never warmed block averages (scope ``warmed_block_average``) and are never mixed with them.
Every percentile is a MetricResult whose status says whether enough requests support it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from .metric import MetricResult, NonNegFloat, NonNegInt, _Model
from .models import ExecutionRecord, _Report


class ServedDistribution(_Model):
    """One per-request quantity (seconds or a rate) over the requests of a run."""

    count: NonNegInt
    mean: MetricResult
    p50: MetricResult
    p90: MetricResult
    p95: MetricResult
    p99: MetricResult
    p99_9: MetricResult
    max: MetricResult


class ServedValidity(_Model):
    """LoadGen's own verdict on the run and its reasons (None: LoadGen did not say)."""

    verdict: Literal["VALID", "INVALID"] | None = None
    perf_constraints_met: bool | None = None
    min_duration_met: bool | None = None
    min_queries_met: bool | None = None
    early_stopping_met: bool | None = None
    reasons: list[str] = Field(default_factory=list)
    early_stopping: list[str] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)


class ServedTokens(_Model):
    """Token-stream figures: time to first token, time per output token, token rates."""

    ttft: ServedDistribution
    tpot: ServedDistribution
    tokens_per_s_per_request: ServedDistribution
    output_tokens: NonNegInt
    tokens_per_s: MetricResult  # aggregate: every output token over the run's span


class ServedBatching(_Model):
    max_batch: NonNegInt
    max_wait_s: NonNegFloat
    batches: NonNegInt
    mean_batch: NonNegFloat | None = None


class ServedReport(_Report):
    """Per-request latency of a handler served under a LoadGen scenario."""

    kind: Literal["served"] = "served"
    name: str | None = None
    handler: str
    scenario: Literal["single_stream", "server", "offline", "multi_stream"]
    options: dict[str, Any] = Field(default_factory=dict)
    execution: ExecutionRecord
    samples: NonNegInt
    requests: NonNegInt
    warmup_calls: NonNegInt = 2
    latency: ServedDistribution
    queueing: ServedDistribution
    service: ServedDistribution
    # the part of queueing before the server loop saw the request: LoadGen's own issue delay
    # (scheduled arrival to IssueQuery); None in reports written before it was recorded.
    # Named after latency on purpose: a sweep page charts the first metrics by name
    loadgen_issue_delay: ServedDistribution | None = None
    offered_qps: MetricResult
    achieved_qps: MetricResult
    validity: ServedValidity
    batching: ServedBatching
    tokens: ServedTokens | None = None
    # raw per-request seconds in issue order (kept so statistics can be recomputed)
    latencies_s: list[NonNegFloat] = Field(default_factory=list)
    queueing_s: list[NonNegFloat] = Field(default_factory=list)
    service_s: list[NonNegFloat] = Field(default_factory=list)
    issue_delay_s: list[NonNegFloat] = Field(default_factory=list)
    # LoadGen's scheduled arrival of each request, seconds after the first (the offered
    # arrival process itself, so a queue can be replayed or simulated on it)
    arrivals_s: list[NonNegFloat] = Field(default_factory=list)
    loadgen: dict[str, Any] = Field(default_factory=dict)  # LoadGen's own results, as written
    loadgen_version: str | None = None


class CapacityPoint(_Model):
    """One server run of a capacity search: its offered rate and what it achieved."""

    offered_qps: NonNegFloat
    achieved_qps: MetricResult
    latency_at_percentile: MetricResult
    p50: MetricResult
    under_bound: bool | None  # None: the percentile is not supported by enough requests
    loadgen_verdict: Literal["VALID", "INVALID"] | None = None


class ServedCapacity(_Report):
    """The highest offered rate whose latency percentile stays under a bound."""

    kind: Literal["served_capacity"] = "served_capacity"
    name: str | None = None
    handler: str
    bound_s: NonNegFloat
    percentile: float
    capacity_qps: MetricResult
    curve: list[CapacityPoint] = Field(default_factory=list)  # in the order they ran
    below: ServedReport | None = None  # the run at the capacity (under the bound)
    above: ServedReport | None = None  # the lowest run found over it
    options: dict[str, Any] = Field(default_factory=dict)
    resolution: NonNegFloat | None = None  # relative gap between below and above at the end
