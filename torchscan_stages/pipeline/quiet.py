"""Dropping the profiler library's own log lines from a stage's standard error.

libkineto writes ``STAGE:`` and ``USDT:`` lines to file descriptor 2 at every profiler start
and stop, below Python and regardless of ``KINETO_LOG_LEVEL``; during ``dvc repro`` they
bury the lines that matter. Everything else written to stderr in the block (warnings,
messages from other libraries) is passed through once the block ends.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Iterator

KINETO_LINE = re.compile(rb"^(STAGE|USDT):\d{4}-\d{2}-\d{2} [^\n]*\.cpp:\d+\] [^\n]*\n?", re.M)


@contextlib.contextmanager
def without_kineto_lines() -> Iterator[None]:
    """Capture fd 2 for the block; re-emit it without libkineto's status lines."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            kept = KINETO_LINE.sub(b"", capture.read())
            if kept:
                sink = getattr(sys.stderr, "buffer", None)
                if sink is not None:
                    sink.write(kept)
                else:  # a replaced sys.stderr (a test runner's capture, say)
                    sys.stderr.write(kept.decode(errors="replace"))
                sys.stderr.flush()
