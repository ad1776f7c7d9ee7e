"""Shared fixtures for the measurement tests."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import pytest


@pytest.fixture
def favoured_priority() -> Iterator[None]:
    """Raise this thread's scheduling priority while a wall-clock test runs, if permitted.

    The development machine's two cores are shared with other jobs; a 2 ms busy-wait that is
    preempted for a 4 ms time slice ends 4 ms late. Priority is a property of the test
    harness, not of the method under test, and is restored afterwards.
    """
    if not hasattr(os, "getpriority"):
        yield
        return
    before = os.getpriority(os.PRIO_PROCESS, 0)
    with contextlib.suppress(PermissionError):
        os.setpriority(os.PRIO_PROCESS, 0, -10)
    try:
        yield
    finally:
        with contextlib.suppress(PermissionError):
            os.setpriority(os.PRIO_PROCESS, 0, before)
