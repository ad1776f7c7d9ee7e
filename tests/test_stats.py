"""Quantiles and IQR: linear interpolation, arithmetic in comments."""

from __future__ import annotations

import math

import pytest

from torchscan_stages.stats import iqr, quantile, quartiles, relative_iqr, summarize


def test_quartiles_interpolate_linearly() -> None:
    values = [4.0, 1.0, 3.0, 2.0, 5.0]  # sorted 1..5, n=5
    # h = (5-1)*0.25 = 1 -> x[1] = 2; median h = 2 -> 3; q3 h = 3 -> 4
    assert quartiles(values) == (2.0, 3.0, 4.0)
    assert iqr(values) == 2.0  # 4 - 2
    assert relative_iqr(values) == pytest.approx(2.0 / 3.0)


def test_quantile_between_order_statistics() -> None:
    # sorted [10, 20, 30, 40]; q=0.5 -> h = 3*0.5 = 1.5 -> 20 + 0.5*(30-20) = 25
    assert quantile([40, 10, 30, 20], 0.5) == 25.0
    # q=0.25 -> h = 0.75 -> 10 + 0.75*10 = 17.5
    assert quantile([40, 10, 30, 20], 0.25) == 17.5


def test_summary_fields() -> None:
    s = summarize([1.0, 2.0, 3.0, 4.0])
    # h(q1)=0.75 -> 1.75; median h=1.5 -> 2.5; h(q3)=2.25 -> 3.25; mean 10/4
    assert (s.q1, s.median, s.q3, s.iqr) == (1.75, 2.5, 3.25, 1.5)
    assert (s.min, s.max, s.mean, s.count) == (1.0, 4.0, 2.5, 4)
    assert s.relative_iqr == pytest.approx(1.5 / 2.5)


def test_single_sample_and_zero_median() -> None:
    assert quartiles([7.0]) == (7.0, 7.0, 7.0)
    assert math.isinf(relative_iqr([0.0, 0.0]))


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match="at least one sample"):
        summarize([])
    with pytest.raises(ValueError, match="finite"):
        summarize([1.0, math.nan])
    with pytest.raises(ValueError, match="q must be within"):
        quantile([1.0], 1.5)


def test_median_precision_from_order_statistics() -> None:
    from torchscan_stages.stats import median_precision

    values = [float(v) for v in range(1, 26)]  # 1..25, n = 25, median 13
    # ranks 12.5 -/+ 0.98 x 5 = 4.9: low floor(7.6) = 7 -> 8.0, high ceil(17.4) - 1 = 17 -> 18.0
    # half-width (18 - 8) / 2 = 5 over the median 13
    assert median_precision(values) == pytest.approx(5 / 13)
    assert median_precision([1.0]) == math.inf  # one value: nothing to judge
