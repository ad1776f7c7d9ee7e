"""Supervising the rss child: watch it until it exits or times out, and never leave it behind.

The child runs in its own session (so its whole process group can be killed), which also
means nothing else stops it when the measuring process is interrupted. :func:`watch` samples
it until it exits or its time is up; :func:`kill_group` ends a timed-out group (SIGTERM, a
grace period, SIGKILL, then every sampled descendant that left the group);
:func:`kill_child_on_signals` makes SIGINT/SIGTERM/SIGHUP of this process kill the group
first and then act as they would have. No clock duration is reported from here: the caller
times the run.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

import psutil

from .rss_sampler import Sampler

KILL_GRACE_S = 0.5


class FatalSignal(BaseException):
    """A signal whose default action ends the process, delivered again once cleanup ran."""

    def __init__(self, number: int) -> None:
        super().__init__(number)
        self.number = number


def watch(
    process: subprocess.Popen[bytes], sampler: Sampler, limit: float, interval: float
) -> bool:
    """Sample until the launcher exits (False) or ``limit`` seconds pass (True: timed out)."""
    deadline = time.monotonic() + limit
    while True:
        sampler.sample()
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            sampler.sample_tree()  # know every descendant, also any that left the group
            return True
        try:
            process.wait(timeout=min(interval, remaining))
            return False
        except subprocess.TimeoutExpired:
            continue


def kill_group(pgid: int, sampler: Sampler, grace: float = KILL_GRACE_S) -> None:
    """SIGTERM the process group, then SIGKILL it and any known descendant that escaped it."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)
        if sig == signal.SIGTERM:
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline:
                try:
                    os.killpg(pgid, 0)
                except (ProcessLookupError, PermissionError):
                    break
                time.sleep(0.02)
    for process in sampler.known.values():
        with contextlib.suppress(psutil.Error):
            process.kill()


def kill_now(pgid: int, sampler: Sampler) -> None:
    """SIGKILL the process group and every known descendant, without waiting (signal-safe)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    for process in list(sampler.known.values()):
        with contextlib.suppress(psutil.Error):
            process.kill()


def kill_group_quietly(pgid: int, sampler: Sampler) -> None:
    """After a normal exit, remove leftovers of the command's process group without waiting."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    for process in sampler.known.values():
        try:
            if process.is_running():
                process.kill()
        except psutil.Error:
            pass


@contextlib.contextmanager
def kill_child_on_signals(kill: Callable[[], None]) -> Iterator[None]:
    """While the child runs, SIGINT/SIGTERM/SIGHUP of this process first kill the child.

    Each handler kills the child's process group, restores the previous handlers and then
    does what the previous handler would have done (raise KeyboardInterrupt, call it, or
    unwind and die of the signal: :class:`FatalSignal`). Handlers can only be installed from
    the main thread; elsewhere the caller's ``finally`` is the only guard. Ignored signals
    stay ignored.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, Any] = {}

    def restore() -> None:
        for number, handler in previous.items():
            signal.signal(number, handler)

    def on_signal(number: int, frame: FrameType | None) -> None:
        kill()
        restore()
        handler = previous[number]
        if callable(handler):
            handler(number, frame)
        else:  # SIG_DFL: unwind (temporary files go), then die of the signal
            raise FatalSignal(number)

    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        number = getattr(signal, name, None)
        if number is None:
            continue
        handler = signal.getsignal(number)
        if handler is None or handler is signal.SIG_IGN:
            continue
        previous[number] = handler
        signal.signal(number, on_signal)
    try:
        yield
    finally:
        restore()


__all__ = [
    "KILL_GRACE_S",
    "FatalSignal",
    "kill_child_on_signals",
    "kill_group",
    "kill_group_quietly",
    "kill_now",
    "watch",
]
