"""Two saved served reports judged with latency's verdict rule (injected queues, no clock)."""

from __future__ import annotations

import pytest
from latency_reports import BASE, latency_report
from served_reports import served_sample

from torchscan_stages.compare.served import compare_served
from torchscan_stages.render import render_report


def test_a_slower_handler_is_slower_at_p50_and_p99() -> None:
    # M/D/1 at 100 requests/s: D = 2 ms (rho 0.2) against D = 3 ms (rho 0.3); 1,000 requests
    # each, so both p99s are complete (368 needed)
    base = served_sample(1000, 100.0, seed=1, name="2 ms")
    cand = served_sample(1000, 100.0, seed=2, name="3 ms", service_ns=3_000_000)
    found = compare_served(base, cand)
    verdicts = {d.metric: d.verdict for d in found.deltas}
    assert verdicts == {"served.latency.p50": "slower", "served.latency.p99": "slower"}
    p50 = found.deltas[0]
    # the point ratio is the reports' own p50s: more than half of the requests wait for
    # nothing at rho <= 0.3, so the p50s sit near the service times, 3 ms / 2 ms
    assert p50.ratio == pytest.approx(p50.candidate.value / p50.baseline.value)
    assert 1.4 < p50.ratio < 1.6 and p50.ci_low is not None and p50.ci_low > 1.0
    assert not found.check.performed
    assert "served.latency.p99" in render_report(found)


def test_the_same_queue_twice_is_no_difference_at_p50() -> None:
    base = served_sample(2000, 100.0, seed=3)
    again = served_sample(2000, 100.0, seed=3)  # identical requests: ratio 1, interval [1, 1]
    p50 = compare_served(base, again).deltas[0]
    assert (p50.ratio, p50.verdict) == (1.0, "no_difference")


def test_different_loads_are_not_comparable_and_thin_tails_inconclusive() -> None:
    slow_rate = served_sample(400, 100.0)
    fast_rate = served_sample(400, 200.0)
    deltas = compare_served(slow_rate, fast_rate).deltas
    assert {d.verdict for d in deltas} == {"not_comparable"}
    assert "options target_qps differs: baseline=100.0, candidate=200.0" in str(deltas[0].reason)
    # 100 requests cannot support a p99 (368 needed): that row cannot be decided
    short = compare_served(served_sample(100, 100.0), served_sample(100, 100.0, seed=5))
    assert short.deltas[1].verdict == "inconclusive" and short.deltas[1].ratio is None


def test_a_report_of_another_kind_is_refused() -> None:
    warmed = latency_report(BASE, "warmed")  # warmed block averages never meet served ones
    with pytest.raises(TypeError, match=r"baseline must be a served report .*, got benchmark"):
        compare_served(warmed, served_sample())  # type: ignore[arg-type]
