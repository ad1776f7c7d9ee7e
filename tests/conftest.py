"""Fixtures shared by the whole suite.

Timing tests never read the host's clock for a verdict, ratio or duration: they inject a
simulated clock that a workload advances by a known cost, so the arithmetic of every
assertion is exact and the suite gives the same answer on a loaded 2-core machine.
"""

from __future__ import annotations

import pytest
from simulated_clock import SimulatedClock

# The suite fails when it changed the checkout (git status before/after): checkout_guard.py.
pytest_plugins = ["checkout_guard"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that skips without a GPU as ``cuda``: ``make gpu-check`` runs ``-m cuda``."""
    for item in items:
        for mark in item.iter_markers("skipif"):
            reason = str(mark.kwargs.get("reason", ""))
            if "GPU" in reason or "CUDA" in reason:
                item.add_marker(pytest.mark.cuda)
                break


@pytest.fixture
def sim_clock() -> SimulatedClock:
    return SimulatedClock()
