"""Reading LoadGen's logs, from lines written the way LoadGen 6.0.17 writes them."""

from __future__ import annotations

import json

from torchscan_stages.serve.figures import Matched, achieved_qps, match, offered_qps
from torchscan_stages.serve.loadgen_log import (
    loadgen_results,
    parse_detail,
    parse_trace,
    validity,
)
from torchscan_stages.serve.server import RequestRecord


def _line(key: str, value: object, *, error: bool = False) -> str:
    meta = {"is_error": error, "is_warning": False, "file": "results.cc"}
    entry = {"key": key, "value": value, "time_ms": 1.0, "metadata": meta}
    return ":::MLLOG " + json.dumps(entry)


INVALID = "\n".join(
    [
        "not a log line",
        _line("result_validity", "INVALID"),
        _line("result_perf_constraints_met", False),
        _line("result_min_duration_met", True),
        _line("result_min_queries_met", True),
        _line("early_stopping_met", False),
        _line("result_invalid_reason", "Reduce target QPS to improve latency. "),
        _line("early_stopping_result", " * Run unsuccessful.  * Processed 498 queries."),
        _line("result_50.00_percentile_latency_ns", 26723772),
        _line("effective_target_qps", 250),
        _line("loaded_qsl_set", [1, 2]),
        _line("error_runtime", "boom", error=True),
    ]
)

# the trace's sample events (one per line) beside a detail event whose key LoadGen quotes
# twice, which makes the file invalid JSON as a whole
TRACE = """{"traceEvents":[
{"name":"LogDetail","ph":"X","pid":1,"tid":2,"ts":1.0,"dur":1.0,"args":{"key":""loadgen_version""}},
{"name":"Sample","cat":"default","ph":"b","pid":1,"id":1,"ts":3707.334,"args":{"sample_seq":1,"query_seq":1,"sample_idx":20,"issue_start_ns":81135,"complete_ns":3173547}},
{"name":"Sample","cat":"default","ph":"b","pid":1,"id":0,"ts":113.093,"args":{"sample_seq":0,"query_seq":0,"sample_idx":28,"issue_start_ns":103,"complete_ns":2821606}},
{"name":"Sample","cat":"default","ph":"e", "pid":1,"id":0,"ts":2934.699},
{"name":"LastTrace"}
]}
"""


def test_the_verdict_and_its_reasons_are_loadgens() -> None:
    detail = parse_detail(INVALID)
    found = validity(detail)
    assert found.verdict == "INVALID"
    assert (found.perf_constraints_met, found.min_duration_met) == (False, True)
    assert (found.min_queries_met, found.early_stopping_met) == (True, False)
    assert found.reasons[0] == "Reduce target QPS to improve latency."
    assert found.reasons[1].startswith("Early stopping not satisfied")
    assert found.early_stopping == ["* Run unsuccessful.  * Processed 498 queries."]
    assert found.errors == ["error_runtime: boom"]
    kept = loadgen_results(detail.values)
    assert kept["result_50.00_percentile_latency_ns"] == 26723772
    assert kept["effective_target_qps"] == 250 and "loaded_qsl_set" not in kept


def test_an_empty_log_says_nothing() -> None:
    found = validity(parse_detail(""))
    assert found.verdict is None and found.reasons == [] and found.min_duration_met is None


def test_trace_samples_come_in_sequence_order_with_loadgens_own_times() -> None:
    samples = parse_trace(TRACE)
    assert [s.sequence for s in samples] == [0, 1]
    first = samples[0]
    # ts is microseconds: 113.093 us = 113093 ns
    assert (first.index, first.scheduled_ns, first.issue_delay_ns) == (28, 113093, 103)
    assert first.latency_ns == 2821606


def test_records_and_trace_pair_by_issue_order_and_index() -> None:
    samples = parse_trace(TRACE)
    records = [
        RequestRecord(0, 28, issued_ns=1_000, started_ns=1_500, done_ns=2_501_500, served=True),
        RequestRecord(1, 99, issued_ns=2_000, started_ns=3_000, done_ns=4_000, served=True),
    ]
    matched: Matched = match(records, samples)
    # the second pair's indices differ (99 vs 20): left out
    assert len(matched.latency_s) == 1
    assert matched.latency_s == [2821606 / 1e9]
    # queueing = LoadGen's issue delay 103 ns + the loop's wait 1500 - 1000 = 500 ns
    assert matched.queueing_s == [603 / 1e9]
    assert matched.service_s == [2_500_000 / 1e9]  # 2,501,500 - 1,500 ns
    assert matched.issue_delay_s == [103 / 1e9]  # LoadGen's own part of the queueing
    # the pair left out is counted, never silently dropped
    assert [(d.code, d.count) for d in matched.diagnostics] == [("served_requests_left_out", 1)]


def test_rates_follow_loadgens_n_minus_one_convention() -> None:
    samples = parse_trace(TRACE)
    # arrivals 113,093 ns and 3,707,334 ns: (2 - 1) / 3.594241 ms = 278.22 requests/s
    offered = offered_qps("server", samples)
    assert offered.value is not None
    assert abs(offered.value - 1 / (3_594_241 / 1e9)) < 1e-6
    # span = first arrival to last completion: (3,707,334 + 3,173,547) - 113,093 ns
    achieved = achieved_qps(samples)
    assert achieved.value is not None
    assert abs(achieved.value - 1 / ((3_707_334 + 3_173_547 - 113_093) / 1e9)) < 1e-6
    assert offered_qps("single_stream", samples).status == "unavailable"  # a closed loop
    assert achieved_qps(samples[:1]).status == "unavailable"
