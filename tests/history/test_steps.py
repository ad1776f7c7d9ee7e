"""fit_steps on generated series: known steps found where planted, none on flat segments.

Every series is generated from a seeded random stream (no clock): the planted ratios and
positions are the arithmetic each assertion checks.
"""

from __future__ import annotations

import math
import random

import pytest

from torchscan_stages.history.steps import default_penalty, fit_steps, robust_scatter, z_value


def _noisy(level: float, count: int, noise: float, rng: random.Random) -> list[float]:
    return [level * (1.0 + noise * rng.gauss(0.0, 1.0)) for _ in range(count)]


def test_exact_steps_are_found_with_their_ratio() -> None:
    # 5 -> 6 (x1.2) after point 9, 6 -> 7.8 (x1.3) after point 19: deterministic values
    values = [5.0] * 10 + [6.0] * 10 + [7.8] * 10
    steps = fit_steps(values, [None] * 30)
    assert [(s.before, s.after) for s in steps] == [(9, 10), (19, 20)]
    assert steps[0].ratio == pytest.approx(1.2) and steps[1].ratio == pytest.approx(1.3)
    assert all(s.ci_low > 1.0 for s in steps)


def test_flat_exact_segment_has_no_step() -> None:
    assert fit_steps([4096.0] * 40, [None] * 40) == []


@pytest.mark.parametrize("seed", range(20))
def test_a_1_3x_step_in_5_percent_noise_is_found_and_flat_noise_gives_none(seed: int) -> None:
    rng = random.Random(seed)
    values = _noisy(100.0, 20, 0.05, rng) + _noisy(130.0, 20, 0.05, rng)
    steps = fit_steps(values, [None] * 40)
    assert [(s.before, s.after) for s in steps] == [(19, 20)]
    # the fitted ratio is the ratio of weighted geometric means: within 10% of 1.3 here
    assert 1.17 < steps[0].ratio < 1.43 and steps[0].ci_low < 1.3 < steps[0].ci_high + 0.1
    assert fit_steps(_noisy(100.0, 40, 0.05, rng), [None] * 40) == []


def test_stated_intervals_weight_the_fit() -> None:
    # the same values: with a tight stated sigma (0.1%) a 2% step is confident; with a wide
    # one (5%) it is not. 2% = 20 sigma in the first case, 0.4 sigma in the second.
    values = [100.0] * 10 + [102.0] * 10
    tight = fit_steps(values, [0.1] * 20, floor=0.0001)
    wide = fit_steps(values, [5.0] * 20, floor=0.0001)
    assert [(s.before, s.after) for s in tight] == [(9, 10)] and wide == []


def test_understated_sigmas_are_inflated_to_the_scatter() -> None:
    # sigma stated as 0.1% while the scatter is 5%: no false step from the narrow intervals
    rng = random.Random(7)
    values = _noisy(10.0, 40, 0.05, rng)
    assert fit_steps(values, [0.01] * 40) == []


def test_a_spike_is_two_steps() -> None:
    steps = fit_steps([5.0] * 10 + [6.0] + [5.0] * 10, [None] * 21)
    assert [(s.before, s.after) for s in steps] == [(9, 10), (10, 11)]
    assert steps[1].ratio == pytest.approx(5.0 / 6.0)


def test_helpers_and_bad_input() -> None:
    assert default_penalty(40) == pytest.approx(4.0 * math.log(40))
    assert z_value(0.95) == pytest.approx(1.959964, rel=1e-5)
    assert z_value(0.95, 10) > z_value(0.95)  # Bonferroni over 10 places
    # MAD of successive differences of a constant series is 0
    assert robust_scatter([1.0] * 10) == 0.0
    assert fit_steps([1.0], [None]) == []
    with pytest.raises(ValueError, match="positive finite"):
        fit_steps([1.0, 0.0], [None, None])
    with pytest.raises(ValueError, match="2 values but 1 sigmas"):
        fit_steps([1.0, 2.0], [None])
