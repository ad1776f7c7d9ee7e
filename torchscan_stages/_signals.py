"""Ending signals (SIGTERM, SIGHUP) as an exception, so temporaries go before the process ends.

What ``dvc exp`` cancellation, CI timeouts and ``kill`` send is SIGTERM, whose default action
ends the process at once: no ``finally`` runs, and a half-written ``.NAME.XXXX.tmp`` stays.
Inside :func:`ending_signals_raise` (main thread only: Python installs handlers nowhere else)
such a signal raises :class:`Terminated` instead, so the unwinding removes temporaries; with
``redeliver`` the signal is then sent again under its default action, so the process still
dies of it as it would have. SIGINT needs nothing: Python already raises KeyboardInterrupt.
Imports nothing of the package (the report layer uses it).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from types import FrameType

ENDING = ("SIGTERM", "SIGHUP")


class Terminated(BaseException):
    """An ending signal arrived; raised where the code was, so cleanup runs."""

    def __init__(self, number: int) -> None:
        super().__init__(f"terminated by {signal.Signals(number).name}")
        self.number = number

    @property
    def exit_code(self) -> int:
        """The shell's convention for death by signal N: 128 + N (143 for SIGTERM)."""
        return 128 + self.number


def _raise(number: int, frame: FrameType | None) -> None:
    raise Terminated(number)


@contextlib.contextmanager
def ending_signals_raise(*, redeliver: bool) -> Iterator[None]:
    """Within: SIGTERM/SIGHUP left at their default action raise :class:`Terminated`.

    Handlers someone installed (a stage's, the caller's) are left alone. ``redeliver``: a
    Terminated leaving the block restores the default action and sends the signal again,
    so a library call never swallows the caller's kill.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    replaced: dict[int, object] = {}
    for name in ENDING:
        number = getattr(signal, name, None)
        if number is not None and signal.getsignal(number) is signal.SIG_DFL:
            replaced[number] = signal.signal(number, _raise)
    try:
        yield
    except Terminated as ended:
        if redeliver and ended.number in replaced:
            signal.signal(ended.number, signal.SIG_DFL)
            replaced.pop(ended.number)
            os.kill(os.getpid(), ended.number)
        raise
    finally:
        for number, handler in replaced.items():
            signal.signal(number, handler)  # type: ignore[arg-type]


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Within: SIGINT, SIGTERM and SIGHUP wait until the block ends (a few renames that must
    happen together), then act as their handlers would have. Main thread only."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: list[int] = []
    previous: dict[int, object] = {}
    for name in ("SIGINT", *ENDING):
        code = getattr(signal, name, None)
        if code is None or signal.getsignal(code) in (None, signal.SIG_IGN):
            continue
        previous[code] = signal.signal(code, lambda n, f: arrived.append(n))
    try:
        yield
    finally:
        for number, before in previous.items():
            signal.signal(number, before)  # type: ignore[arg-type]
        if arrived:
            first = previous[arrived[0]]
            if callable(first):
                first(arrived[0], None)
            else:  # the default action: die of it, now that the block is done
                os.kill(os.getpid(), arrived[0])
