"""The served percentile rule on injected samples: LoadGen's index and the binomial status."""

from __future__ import annotations

import math

import pytest

from torchscan_stages.serve.figures import distribution
from torchscan_stages.serve.percentiles import (
    PERCENTILES,
    nearest_rank,
    needed_requests,
    order_ranks,
    percentile_metric,
)

KW = {"unit": "s", "scope": "served_request_latency", "method": "loadgen_trace"}


def test_the_value_is_loadgens_index_floor_n_p() -> None:
    values = [float(v) for v in range(1, 101)]  # 1..100
    # n = 100: p50 -> index floor(100 * 0.5) = 50 -> 51; p99 -> index 99 -> 100
    assert nearest_rank(values, 50.0) == 51.0
    assert nearest_rank(values, 99.0) == 100.0
    # p99.9 -> index floor(99.9) = 99 -> the last; a tiny sample clamps to its last too
    assert nearest_rank(values, 99.9) == 100.0
    assert nearest_rank([7.0], 50.0) == 7.0


@pytest.mark.parametrize(
    ("percent", "needed"),
    # p^n <= 0.025: n >= ln(0.025) / ln(p) = 3.689 / -ln(p)
    [(50.0, 6), (90.0, 36), (95.0, 72), (99.0, 368), (99.9, 3688)],
)
def test_a_percentile_is_complete_from_the_request_count_the_rule_names(
    percent: float, needed: int
) -> None:
    assert needed_requests(percent) == needed
    enough = [float(v) for v in range(needed)]
    short = enough[:-1]
    assert percentile_metric(enough, percent, **KW).status == "complete"
    # one request fewer: p^(n-1) > 2.5%, so no upper order statistic bounds the quantile
    assert percentile_metric(short, percent, **KW).status != "complete"


def test_too_few_requests_give_a_95_percent_lower_bound_then_nothing() -> None:
    # p99 over 100 requests: K ~ Bin(100, 0.99); P(K <= 96) = 1 - P(K >= 97)
    # = 1 - (0.99^100 + 100*0.99^99*0.01 + 4950*0.99^98*0.01^2 + 161700*0.99^97*0.01^3)
    # = 1 - (0.36603 + 0.36973 + 0.18486 + 0.06100) = 0.01837 <= 0.025, and P(K <= 97) =
    # 0.01837 + 0.06100 = 0.0794 > 0.025; r is the largest with P(K <= r - 1) <= 0.025, so
    # r - 1 = 96, r = 97: x_(97) = 97.0
    values = [float(v) for v in range(1, 101)]
    lower, upper = order_ranks(100, 99.0)
    assert (lower, upper) == (97, 101)  # 101 > n: no upper bound inside the sample
    result = percentile_metric(values, 99.0, **KW)
    assert (result.status, result.known_value) == ("partial", 97.0)
    # p99 of 1 request: P(K <= 0) = (1 - 0.99)^1 = 0.01 <= 0.025, so r = 1: the one value
    # is below the p99 with 99% confidence, a lower bound
    one = percentile_metric([5.0], 99.0, **KW)
    assert (one.status, one.known_value) == ("partial", 5.0)
    # p50 of 1 request: P(K <= 0) = 0.5 > 0.025, so r = 0: nothing is known
    assert percentile_metric([5.0], 50.0, **KW).status == "unavailable"
    assert percentile_metric([], 50.0, **KW).status == "unavailable"


def test_the_interval_of_the_median_matches_the_binomial_table() -> None:
    # n = 20, p = 0.5: P(K <= 5) = 0.0207 <= 0.025 < P(K <= 6) = 0.0577, so r = 6;
    # symmetric: s = 20 + 1 - 6 = 15 (the textbook 95% interval of the median: x_(6), x_(15))
    assert order_ranks(20, 50.0) == (6, 15)


def test_a_distribution_reports_mean_max_and_every_percentile() -> None:
    values = [0.001 * v for v in range(1, 401)]  # 400 requests: 1 ms .. 400 ms
    found = distribution(values, **KW)
    assert found.count == 400
    # mean of 1..400 ms = 200.5 ms; max = 400 ms
    assert math.isclose(found.mean.value or 0, 0.2005)
    assert found.max.value == pytest.approx(0.4)
    # p99: index floor(400 * 0.99) = 396 -> 397 ms; 0.99^400 = 0.018 <= 0.025: complete
    assert found.p99.status == "complete" and found.p99.value == pytest.approx(0.397)
    # p99.9 needs 3,688 requests: a lower bound only
    assert found.p99_9.status == "partial"
    assert {name for name, _ in PERCENTILES} == {"p50", "p90", "p95", "p99", "p99_9"}
    empty = distribution([], **KW)
    assert empty.count == 0 and empty.mean.status == empty.p50.status == "unavailable"
