"""Fixtures shared by the whole suite.

Timing tests never read the host's clock for a verdict, ratio or duration: they inject a
simulated clock that a workload advances by a known cost, so the arithmetic of every
assertion is exact and the suite gives the same answer on a loaded 2-core machine.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest
from child_env import TIMING_LOCK
from simulated_clock import SimulatedClock

# The suite fails when it changed the checkout (git status before/after): checkout_guard.py.
pytest_plugins = ["checkout_guard"]


# The pipeline's timing lock is host-wide by default (pipeline/hostlock.py): a test session
# that used it would wait on every other timing job of the host (another checkout's
# `dvc repro`, the other test tier that `make check` runs beside this one), and they on it.
# Each session (each xdist worker) gets a lock folder of its own, which its stage children
# inherit (tests/child_env.py keeps it); test_scale_hostlock.py sets its own.
_session_lock: str | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _session_lock
    if TIMING_LOCK not in os.environ:
        _session_lock = tempfile.mkdtemp(prefix="torchscan-test-timing-lock-")
        os.environ[TIMING_LOCK] = _session_lock


def pytest_unconfigure(config: pytest.Config) -> None:
    if _session_lock is not None:
        os.environ.pop(TIMING_LOCK, None)
        shutil.rmtree(_session_lock, ignore_errors=True)


# The e2e tier's longest modules (minutes each, mostly `dvc repro`), longest first: on
# pytest-xdist workers a module stays on one worker, so starting these first keeps one of
# them from running alone at the end (longest-processing-time-first scheduling).
LONGEST_FIRST = (
    "pipeline/test_pipeline_dvc.py",
    "pipeline/test_pipeline_user_model.py",
    "pipeline/test_pipeline_hf_branch.py",
    "pipeline/test_scale_launchers.py",
    "history/test_history_e2e.py",
)


def _start_rank(item: pytest.Item) -> int:
    path = item.path.as_posix()
    ranks = [i for i, name in enumerate(LONGEST_FIRST) if path.endswith("tests/" + name)]
    return ranks[0] if ranks else len(LONGEST_FIRST)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Longest e2e modules first (file order kept within each module); GPU tests marked.

    Every test that skips without a GPU is marked ``cuda``: ``make gpu-check`` runs ``-m cuda``.
    """
    items.sort(key=_start_rank)  # stable: the order within and between the others is kept
    for item in items:
        for mark in item.iter_markers("skipif"):
            reason = str(mark.kwargs.get("reason", ""))
            if "GPU" in reason or "CUDA" in reason:
                item.add_marker(pytest.mark.cuda)
                break


@pytest.fixture
def sim_clock() -> SimulatedClock:
    return SimulatedClock()
