"""The figures against queueing theory, on an injected single-server queue (no LoadGen).

tests/served_reports.py feeds the report builder what LoadGen's trace and the loop would
hold for Poisson arrivals and a deterministic 2 ms service (the Lindley recursion), so the
figures can be checked against the M/D/1 closed forms without reading a clock.
"""

from __future__ import annotations

import pytest
from served_reports import served_sample


def test_mean_latency_and_queueing_match_md1_at_utilisation_half() -> None:
    # M/D/1, lambda = 250/s, D = 2 ms: rho = 0.5, mean wait Wq = rho D / (2 (1 - rho))
    # = 0.5 * 2 / (2 * 0.5) = 1 ms; mean latency = Wq + D = 3 ms. 10,000 requests: the
    # sample mean is within 2% (seeds 0-4 gave 2.97-3.06 ms, waits 0.97-1.06 ms)
    report = served_sample(10_000, 250.0)
    assert report.latency.mean.value == pytest.approx(0.003, rel=0.03)
    assert report.queueing.mean.value == pytest.approx(0.001, rel=0.08)
    # every handler call takes 2 ms: the service distribution is a point
    assert report.service.p50.value == report.service.max.value == pytest.approx(0.002)
    # P(no wait) = 1 - rho = 0.5, so the median wait sits at the edge of 0
    assert report.queueing.p50.value is not None and report.queueing.p50.value < 0.0002
    # offered = (n - 1) / (last - first arrival), the scheduled Poisson rate
    assert report.offered_qps.value == pytest.approx(250.0, rel=0.02)
    assert report.latency.p99_9.status == "complete"  # 10,000 >= 3,688


def test_ttft_and_tpot_split_a_stream() -> None:
    # 3 tokens, the first at start + D/3, the last at start + D: TPOT = (2/3 D) / 2 = D/3
    report = served_sample(400, 100.0, tokens=3)
    assert report.tokens is not None
    assert report.tokens.tpot.p50.value == pytest.approx(0.002 / 3, abs=1e-9)
    # TTFT = latency - (done - first token) = queueing + D/3
    first = report.latencies_s[0] - 2 * 0.002 / 3
    assert report.tokens.ttft.count == 400 and first > 0
    assert report.tokens.output_tokens == 1200  # 400 requests x 3 tokens
