"""Served percentiles and when the requests support them.

The value of percentile p over n requests is LoadGen's own convention: the sorted values'
element at index floor(n * p / 100) (0-based), so it equals the figure in LoadGen's log.

Whether it is ``complete`` is decided by a distribution-free 95% interval of the true
p-quantile from two order statistics (the binomial rule; Hahn and Meeker's): with
K ~ Binomial(n, p) requests at or below the quantile, the lower rank r is the largest with
P(K <= r - 1) <= 2.5% and the upper rank s the smallest with P(K >= s) <= 2.5%.

| status | when | value |
| complete | both ranks fall inside the sample (s <= n): p^n <= 2.5% | the percentile |
| partial | only the lower rank does (r >= 1) | known_value = x_(r), a 95% lower bound |
| unavailable | no request, or not even a lower rank: (1 - p)^n > 2.5% | none |

So p50 needs 6 requests, p90 36, p95 72, p99 368 and p99.9 3,688 to be complete. Requests
of one served run are not independent (a queue couples neighbours), so the interval is a
floor on the evidence needed, not a guarantee; ``max`` is the largest observed, complete
from one request on.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..report import MetricResult

ALPHA = 0.025  # each side of the 95% interval
# the percentiles every served distribution reports (name, percent)
PERCENTILES: tuple[tuple[str, float], ...] = (
    ("p50", 50.0),
    ("p90", 90.0),
    ("p95", 95.0),
    ("p99", 99.0),
    ("p99_9", 99.9),
)


def nearest_rank(ordered: Sequence[float], percent: float) -> float:
    """LoadGen's percentile: ordered[floor(n * p)] (0-based, clamped to the last)."""
    n = len(ordered)
    return ordered[min(int(n * (percent / 100.0)), n - 1)]


def _ranks_at_most(n: int, prob: float, alpha: float) -> int:
    """The largest m in [0, n + 1] with P(Binomial(n, prob) <= m - 1) <= alpha."""
    log_odds = math.log(prob) - math.log1p(-prob)
    log_pmf = n * math.log1p(-prob)  # P(X = 0)
    cdf = 0.0
    for k in range(n + 1):
        cdf += math.exp(log_pmf)
        if cdf > alpha:
            return k  # P(X <= k) > alpha, P(X <= k - 1) <= alpha
        log_pmf += math.log(n - k) - math.log(k + 1) + log_odds if k < n else 0.0
    return n + 1


def order_ranks(n: int, percent: float, alpha: float = ALPHA) -> tuple[int, int]:
    """(lower rank r, upper rank s), 1-based, of the quantile's two-sided interval.

    r < 1: no lower bound inside the sample; s > n: no upper bound inside it.
    """
    p = percent / 100.0
    lower = _ranks_at_most(n, p, alpha)  # P(K <= r - 1) <= alpha
    # P(K >= s) <= alpha  <=>  P(J <= n - s) <= alpha with J = n - K ~ Binomial(n, 1 - p)
    upper = n + 1 - _ranks_at_most(n, 1.0 - p, alpha)
    return lower, upper


def percentile_metric(
    ordered: Sequence[float], percent: float, *, unit: str, scope: str, method: str
) -> MetricResult:
    """Percentile ``percent`` of the sorted values, with the status of the rule above."""
    n = len(ordered)
    if n == 0:
        return MetricResult.unavailable(unit=unit, scope=scope, method=method)
    lower, upper = order_ranks(n, percent)
    if upper <= n:
        return MetricResult.complete(
            float(nearest_rank(ordered, percent)), unit=unit, scope=scope, method=method
        )
    if lower >= 1:
        return MetricResult.partial(
            float(ordered[lower - 1]), unit=unit, scope=scope, method=method
        )
    return MetricResult.unavailable(unit=unit, scope=scope, method=method)


def needed_requests(percent: float, alpha: float = ALPHA) -> int:
    """The fewest requests for a complete ``percent`` (p^n <= alpha)."""
    return math.ceil(math.log(alpha) / math.log(percent / 100.0))
