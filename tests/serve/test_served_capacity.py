"""served_capacity's search on an injected latency model, and one short real search."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import pytest

from torchscan_stages.report import CapacityPoint, MetricResult
from torchscan_stages.serve.capacity import (
    CapacitySearch,
    Probe,
    capacity_result,
    judge,
    judge_requests,
    pooled,
    pooled_rates,
    search_rates,
    served_capacity,
)
from torchscan_stages.serve.percentiles import nearest_rank, order_ranks

KW = {"unit": "s", "scope": "served_request_latency", "method": "loadgen_trace"}
LIMIT = 371.2  # the injected handler keeps its p99 under the bound up to this rate
BOUND = 0.01


def _at(qps: float, over: int, n: int = 1000) -> Probe:
    """One run of ``n`` requests at ``qps``: ``over`` of them at 20 ms, the rest at 5 ms."""
    latencies = (0.005,) * (n - over) + (0.02,) * over
    p99 = MetricResult.complete(nearest_rank(sorted(latencies), 99.0), **KW)
    point = CapacityPoint(
        offered_qps=qps,
        achieved_qps=MetricResult.complete(qps, unit="requests/s", scope="r", method="m"),
        latency_at_percentile=p99,
        p50=MetricResult.complete(0.005, **KW),
        under_bound=p99.value is not None and p99.value <= BOUND,
    )
    return Probe(qps, judge(p99, BOUND), point, latencies=latencies)


def _model(qps: float) -> Probe:
    """Under the bound exactly up to LIMIT requests/s: beyond it 50 of 1,000 requests over."""
    return _at(qps, 0 if qps <= LIMIT else 50)


def _search(run_at: Callable[[float], Probe], **search: Any) -> list[Probe]:
    plan = CapacitySearch(start_qps=100.0, **search)
    return search_rates(pooled(run_at, 99.0, BOUND, plan.pool_runs), 100.0, plan)


def test_a_rate_is_judged_on_its_percentiles_interval() -> None:
    # 1,000 requests: p99's 95% interval is x_(983)..x_(997) (order_ranks), so up to 3 over
    # (x_(997) under) is under, 18 or more (x_(983) over) is over, 4 to 17 is close
    assert order_ranks(1000, 99.0) == (983, 997)
    judged = {
        over: judge_requests(sorted(_at(1.0, over).latencies), 99.0, BOUND, final=False)
        for over in (3, 4, 17, 18)
    }
    assert judged == {3: "under", 4: "close", 17: "close", 18: "over"}
    # the last allowed run decides a close rate on the percentile: x at index 990, 0-based
    # (LoadGen's floor(1000 * 0.99)): 9 over leave it at 5 ms, 10 put it at 20 ms
    final = [
        judge_requests(sorted(_at(1.0, k).latencies), 99.0, BOUND, final=True) for k in (9, 10)
    ]
    assert final == ["under", "over"]
    assert judge_requests([0.001] * 100, 99.0, BOUND, final=False) == "unsupported"  # < 368


def test_the_search_grows_then_halves_the_gap_on_a_log_scale() -> None:
    probes = _search(_model)
    rates = [p.qps for p in probes]
    # 100, 200 under; 400 over; then geometric means: sqrt(200*400) = 282.84 under,
    # sqrt(282.84*400) = 336.36 under, sqrt(336.36*400) = 366.80 under,
    # sqrt(366.80*400) = 383.04 over: gap (383.04 - 366.80) / 366.80 = 4.4% <= 5%; 383.04
    # once more (100 of 2,000 pooled requests over: over again): confirmed, done
    expected = [100.0, 200.0, 400.0]
    low, high = 200.0, 400.0
    for over in (False, False, False, True):
        mid = math.sqrt(low * high)
        expected.append(mid)
        low, high = (low, mid) if over else (mid, high)
    assert rates == pytest.approx([*expected, expected[-1]])
    assert [p.runs for p in probes[-2:]] == [1, 2]
    capacity, gap = capacity_result(probes, CapacitySearch())
    assert capacity.status == "complete"
    assert capacity.value == pytest.approx(366.80, abs=0.01)
    assert gap == pytest.approx((383.04 - 366.80) / 366.80, abs=1e-3)
    [note] = pooled_rates(probes)
    assert note.severity == "info" and "383 requests/s (2 runs)" in note.message


def test_a_stalled_run_is_pooled_and_the_search_goes_on_above_it() -> None:
    """The host stalls the first run at 383.04 (10 of 1,000 requests over, though the rate
    meets the bound): close, so it runs again; pooled, 10 of 2,000 are under."""
    stalled: list[float] = []

    def disturbed(qps: float) -> Probe:  # meets the bound up to 390 requests/s
        if 380 < qps < 390 and not stalled:
            stalled.append(qps)
            return _at(qps, 10)  # the stall
        return _at(qps, 0 if qps <= 390 else 50)

    probes = _search(disturbed)
    rates = [round(p.qps, 2) for p in probes]
    # as above to 366.80; 383.04 close (4 to 17 of 1,000 over), again: 10 of 2,000 over,
    # at most 11 is under (order_ranks(2000) = (1971, 1989)); the gap to 400 is
    # (400 - 383.04) / 383.04 = 4.4% <= 5%, and 400's second run (the third probe was its
    # first), 100 of 2,000 over: confirmed
    assert order_ranks(2000, 99.0) == (1971, 1989)
    assert rates == [100.0, 200.0, 400.0, 282.84, 336.36, 366.8, 383.04, 383.04, 400.0]
    assert [p.judgement for p in probes[6:8]] == ["close", "under"]
    capacity, gap = capacity_result(probes, CapacitySearch())
    assert (capacity.status, capacity.value) == ("complete", pytest.approx(383.04, abs=0.01))
    assert gap == pytest.approx((400 - 383.04) / 383.04, abs=1e-3)


def test_an_over_that_is_never_confirmed_is_not_complete() -> None:
    # the runs run out on the confirming rerun: the closed gap alone is a lower bound
    probes = _search(_model, max_runs=7)
    assert len(probes) == 7
    capacity, _ = capacity_result(probes, CapacitySearch())
    assert (capacity.status, capacity.known_value) == ("partial", pytest.approx(366.80, abs=0.01))


def test_no_run_over_the_bound_gives_a_lower_bound_and_none_under_gives_nothing() -> None:
    always_under = search_rates(_model, 1.0, CapacitySearch(max_runs=3))  # 1, 2, 4 qps
    capacity, _ = capacity_result(always_under, CapacitySearch())
    assert (capacity.status, capacity.known_value) == ("partial", 4.0)
    # starting over the bound, the search comes down; with 1 run it never gets under
    over = search_rates(_model, 1000.0, CapacitySearch(max_runs=1))
    assert capacity_result(over, CapacitySearch())[0].status == "unavailable"


def test_an_unsupported_percentile_is_not_under() -> None:
    # a 95% lower bound over the bound is over; one under it decides nothing
    assert judge(MetricResult.partial(0.02, **KW), 0.01) == "over"
    assert judge(MetricResult.partial(0.005, **KW), 0.01) == "unsupported"
    assert judge(MetricResult.unavailable(**KW), 0.01) == "unsupported"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"bound_s": 0.0}, "bound_s"),
        ({"bound_s": float("nan")}, "bound_s"),
        ({"bound_s": 0.01, "percentile": 100.0}, "percentile"),
        ({"bound_s": 0.01, "options": {"target_qps": 5}}, "not inside options"),
        ({"bound_s": 0.01, "search": {"growth": 1.0}}, "growth"),
        ({"bound_s": 0.01, "search": {"max_runs": 0}}, "max_runs"),
        ({"bound_s": 0.01, "search": {"pool_runs": 0}}, "pool_runs must be an int in"),
        ({"bound_s": 0.01, "search": {"pool": 3}}, r"capacity search has unknown key\(s\)"),
    ],
)
def test_bad_bounds_and_searches_are_refused_before_any_run(kwargs: dict, message: str) -> None:
    calls: list[int] = []
    with pytest.raises(ValueError, match=message):
        served_capacity(lambda s: calls.append(s), [1, 2], **kwargs)
    assert calls == []


def test_a_short_real_search_keeps_every_run_as_a_curve_point() -> None:
    pytest.importorskip("mlperf_loadgen")
    # p50 needs 6 requests a run; a bound of 10 s no run reaches: every run is under, so the
    # capacity is a lower bound, the highest rate tried (2 runs: 50 then 100 requests/s)
    found = served_capacity(
        lambda s: s,
        list(range(4)),
        bound_s=10.0,
        percentile=50.0,
        options={"duration_s": 0.05},
        search={"start_qps": 50.0, "max_runs": 2},
    )
    assert [p.offered_qps for p in found.curve] == [50.0, 100.0]
    assert all(p.under_bound for p in found.curve)
    assert (found.capacity_qps.status, found.capacity_qps.known_value) == ("partial", 100.0)
    assert found.below is not None and found.above is None
    assert found.kind == "served_capacity"


def test_a_handler_slower_than_the_bound_is_an_honest_unavailable() -> None:
    # each call sleeps at least 20 ms against a 1 ms bound: no rate can meet it, and no run
    # is made to find that out (a search would only descend towards zero)
    found = served_capacity(lambda s: time.sleep(0.02), [1], bound_s=0.001)
    assert found.capacity_qps.status == "unavailable"
    assert found.curve == [] and found.below is None and found.above is None
    assert [d.code for d in found.diagnostics] == ["served_slower_than_bound"]
    assert "over bound_s=0.001 s" in found.diagnostics[0].message
