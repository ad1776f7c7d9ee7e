"""Python's own Ctrl-C handler for a test's duration, whatever the suite was launched with.

A suite started in the background by a non-interactive shell (``sh -c 'pytest &'``) inherits
SIGINT ignored, and so does every child it starts: an ignored signal stays ignored through
exec. Tests of what Ctrl-C does set the handler an interactive session has, for their own
duration, and give the inherited one back after.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator


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
