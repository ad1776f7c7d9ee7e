"""served_capacity's search on an injected latency model, and one short real search."""

from __future__ import annotations

import math
import time

import pytest

from torchscan_stages.report import CapacityPoint, MetricResult
from torchscan_stages.serve.capacity import (
    CapacitySearch,
    Probe,
    capacity_result,
    judge,
    search_rates,
    served_capacity,
)

KW = {"unit": "s", "scope": "served_request_latency", "method": "loadgen_trace"}
LIMIT = 371.2  # the injected handler keeps its p99 under the bound up to this rate


def _model(qps: float) -> Probe:
    """A handler whose p99 is under the 10 ms bound exactly up to LIMIT requests/s."""
    p99 = 0.009 if qps <= LIMIT else 0.02
    latency = MetricResult.complete(p99, **KW)
    point = CapacityPoint(
        offered_qps=qps,
        achieved_qps=MetricResult.complete(qps, unit="requests/s", scope="r", method="m"),
        latency_at_percentile=latency,
        p50=latency,
        under_bound=qps <= LIMIT,
    )
    return Probe(qps, judge(latency, 0.01), point)


def test_the_search_grows_then_halves_the_gap_on_a_log_scale() -> None:
    probes = search_rates(_model, 100.0, CapacitySearch(start_qps=100.0))
    rates = [p.qps for p in probes]
    # 100, 200 under; 400 over; then geometric means: sqrt(200*400) = 282.84 under,
    # sqrt(282.84*400) = 336.36 under, sqrt(336.36*400) = 366.80 under,
    # sqrt(366.80*400) = 383.04 over: gap (383.04 - 366.80) / 366.80 = 4.4% <= 5%, done
    expected = [100.0, 200.0, 400.0]
    low, high = 200.0, 400.0
    for over in (False, False, False, True):
        mid = math.sqrt(low * high)
        expected.append(mid)
        low, high = (low, mid) if over else (mid, high)
    assert rates == pytest.approx(expected)
    capacity, gap = capacity_result(probes, CapacitySearch())
    assert capacity.status == "complete"
    assert capacity.value == pytest.approx(366.80, abs=0.01)
    assert gap == pytest.approx((383.04 - 366.80) / 366.80, abs=1e-3)


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
