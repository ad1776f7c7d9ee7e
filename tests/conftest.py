"""Fixtures shared by the whole suite.

Timing tests never read the host's clock for a verdict, ratio or duration: they inject a
simulated clock that a workload advances by a known cost, so the arithmetic of every
assertion is exact and the suite gives the same answer on a loaded 2-core machine.
"""

from __future__ import annotations

import pytest
from simulated_clock import SimulatedClock


@pytest.fixture
def sim_clock() -> SimulatedClock:
    return SimulatedClock()
