"""Descriptive statistics over raw samples (block times): quantiles, IQR, relative IQR.

Raw samples are kept in reports and statistics are derived from them, so anyone can
recompute them. Quantiles use linear interpolation between order statistics (numpy's
default "linear" method): q(p) = x[floor(h)] + (h - floor(h)) * (x[floor(h)+1] - x[floor(h)])
with h = (n - 1) * p on the sorted samples.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


def _checked(values: Sequence[float], argument: str) -> list[float]:
    data = sorted(float(v) for v in values)
    if not data:
        raise ValueError(f"{argument} must contain at least one sample, got an empty sequence")
    for value in data:
        if not math.isfinite(value):
            raise ValueError(f"{argument} must contain finite numbers, got {value!r}")
    return data


def quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile (0 <= q <= 1) of ``values`` by linear interpolation."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q must be within [0, 1], got {q!r}")
    data = _checked(values, "values")
    position = (len(data) - 1) * q
    lower = math.floor(position)
    upper = min(lower + 1, len(data) - 1)
    fraction = position - lower
    return data[lower] + fraction * (data[upper] - data[lower])


def quartiles(values: Sequence[float]) -> tuple[float, float, float]:
    """(q1, median, q3) of ``values``."""
    return quantile(values, 0.25), quantile(values, 0.5), quantile(values, 0.75)


def iqr(values: Sequence[float]) -> float:
    """Interquartile range q3 - q1."""
    q1, _, q3 = quartiles(values)
    return q3 - q1


def relative_iqr(values: Sequence[float]) -> float:
    """IQR / median; infinite when the median is zero (no spread can be judged)."""
    q1, median, q3 = quartiles(values)
    return (q3 - q1) / median if median > 0 else math.inf


def median_precision(values: Sequence[float]) -> float:
    """Relative half-width of a distribution-free 95% interval of the median.

    The interval runs between the order statistics of ranks n/2 -/+ 0.98 sqrt(n) (the
    binomial's normal approximation: 1.96 sqrt(n) / 2); infinite when fewer than 2 values
    or a zero median leave nothing to judge.
    """
    data = _checked(values, "values")
    n = len(data)
    middle = quantile(data, 0.5)
    if n < 2 or middle <= 0:
        return math.inf
    spread = 0.98 * math.sqrt(n)
    low = max(0, math.floor(n / 2 - spread))
    high = min(n - 1, math.ceil(n / 2 + spread) - 1)
    return (data[high] - data[low]) / 2 / middle


@dataclass(frozen=True)
class Summary:
    """Descriptive statistics of one sample set."""

    median: float
    q1: float
    q3: float
    iqr: float
    min: float
    max: float
    mean: float
    count: int

    @property
    def relative_iqr(self) -> float:
        return self.iqr / self.median if self.median > 0 else math.inf


def summarize(values: Sequence[float]) -> Summary:
    """Median, quartiles, IQR, min, max, mean and count of ``values``."""
    data = _checked(values, "values")
    q1, median, q3 = quartiles(data)
    return Summary(
        median=median,
        q1=q1,
        q3=q3,
        iqr=q3 - q1,
        min=data[0],
        max=data[-1],
        mean=math.fsum(data) / len(data),
        count=len(data),
    )
