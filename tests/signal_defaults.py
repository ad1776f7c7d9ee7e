"""Signal dispositions a test needs, whatever the suite was launched with.

A suite started in the background by a non-interactive shell (``sh -c 'pytest &'``) inherits
SIGINT ignored; one started under ``nohup`` inherits SIGHUP ignored; every child it starts
inherits the same, because an ignored signal stays ignored through exec. Tests of what a
signal does either set the handler an interactive session has for their own duration
(:func:`python_sigint`) or give the child they test the default dispositions
(:func:`child_default_signals`, as ``preexec_fn``), never touching the suite's own.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

# the signals a terminal, a logout or a kill delivers, which launchers may have set to SIG_IGN
RESET = ("SIGINT", "SIGTERM", "SIGHUP")


@contextlib.contextmanager
def python_sigint() -> Iterator[None]:
    """Within: SIGINT raises KeyboardInterrupt in this process, and a child started within
    begins with SIGINT at its default action (exec turns a handler into SIG_DFL; only SIG_IGN
    survives it), which a Python child turns into KeyboardInterrupt again."""
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, inherited)


def child_default_signals() -> None:
    """``preexec_fn`` for a child under test: SIGINT, SIGTERM and SIGHUP at SIG_DFL, as an
    interactive shell would start it (a Python child turns SIGINT's default into its
    KeyboardInterrupt handler again). Runs in the forked child only: the suite keeps its
    own dispositions, so ``nohup make check`` still survives the logout it was meant for."""
    for name in RESET:
        signal.signal(getattr(signal, name), signal.SIG_DFL)
