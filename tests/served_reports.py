"""``served`` and ``served_capacity`` reports from injected records and traces (no LoadGen
runs, no clock read): what the codec, render and comparison tests use."""

from __future__ import annotations

import json
import random

from torchscan_stages.provenance import build_provenance
from torchscan_stages.report import ServedCapacity, ServedReport
from torchscan_stages.serve.capacity import CapacitySearch, bracket, capacity_result, probe_of
from torchscan_stages.serve.loadgen_log import TraceSample, parse_detail
from torchscan_stages.serve.loadgen_run import LoadgenOutput
from torchscan_stages.serve.measure import ServedRun, served_report
from torchscan_stages.serve.options import ServeOptions
from torchscan_stages.serve.server import LoopState, RequestRecord

SERVICE_NS = 2_000_000  # every request's handler call: 2 ms


def _detail(verdict: str) -> str:
    lines = [("result_validity", verdict), ("result_min_duration_met", True)]
    return "\n".join(
        ":::MLLOG " + json.dumps({"key": k, "value": v, "metadata": {}}) for k, v in lines
    )


def served_run(
    count: int, qps: float, *, seed: int = 0, tokens: int = 0, service_ns: int = SERVICE_NS
) -> ServedRun:
    """A deterministic single-server queue: Poisson arrivals at ``qps``, 2 ms service each
    (the Lindley recursion), as LoadGen's trace and the loop's records would hold it."""
    rng = random.Random(seed)
    arrival = free = 0
    records, trace = [], []
    for n in range(count):
        arrival += int(rng.expovariate(qps) * 1e9)
        start = max(arrival, free)
        free = start + service_ns
        record = RequestRecord(n, n % 4, arrival, start, -1, free, 0, 1, True)
        if tokens:
            record.first_token_ns = start + service_ns // tokens
            record.tokens = tokens
        records.append(record)
        trace.append(TraceSample(n, n % 4, arrival, 0, free - arrival))
    output = LoadgenOutput(parse_detail(_detail("VALID")), trace, None, "6.0.17")
    return ServedRun(LoopState(records, None, [1] * count), output, None, bool(tokens), 0.002)


def served_sample(
    count: int = 400,
    qps: float = 250.0,
    *,
    seed: int = 0,
    tokens: int = 0,
    name: str = "injected",
    service_ns: int = SERVICE_NS,
) -> ServedReport:
    options = ServeOptions(target_qps=qps, bound_s=0.01)
    run = served_run(count, qps, seed=seed, tokens=tokens, service_ns=service_ns)
    return served_report(run, served_sample, list(range(4)), "server", options, None, name)


def capacity_sample(count: int = 400) -> ServedCapacity:
    rates = (100.0, 200.0, 400.0)
    reports = [served_sample(count, qps, seed=i) for i, qps in enumerate(rates)]
    probes = [probe_of(r, r.options["target_qps"], 0.01, 99.0) for r in reports]
    capacity, gap = capacity_result(probes, CapacitySearch())
    below, above = bracket(probes)
    return ServedCapacity(
        provenance=build_provenance(),
        handler="injected",
        bound_s=0.01,
        percentile=99.0,
        capacity_qps=capacity,
        curve=[p.point for p in probes],
        below=below.report if below else None,
        above=above.report if above else None,
        resolution=gap,
    )
