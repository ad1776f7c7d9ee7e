"""The profile stage's stderr filter: libkineto's status lines dropped, everything else kept."""

from __future__ import annotations

import subprocess
import sys

from torchscan_stages.pipeline.quiet import KINETO_LINE

MARK = "-- the filter ends here --"

# One child for both sides: the filtered block first (kineto's first start, the case most
# likely to leak), then a bare profile after a marker, which proves torch still prints the
# lines (at every profiler start and stop) that the filter dropped before it.
SCRIPT = f"""
import sys, warnings, torch
from torchscan_stages.pipeline.quiet import without_kineto_lines
with without_kineto_lines():
    with torch.profiler.profile():
        torch.randn(3) + 1
    warnings.warn("a real warning")
    print("a message of our own", file=sys.stderr)
print({MARK!r}, file=sys.stderr, flush=True)
with torch.profiler.profile():
    torch.randn(3) + 1
"""


def test_kineto_lines_are_dropped_and_other_stderr_kept() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, check=True)
    filtered, marker, bare = done.stderr.partition(MARK.encode())
    assert marker, done.stderr
    assert KINETO_LINE.search(bare), "torch no longer prints the lines this filter drops"
    assert not KINETO_LINE.search(filtered)
    assert b"a real warning" in filtered and b"a message of our own" in filtered


def test_pattern_matches_only_status_lines() -> None:
    line = (
        b"USDT:2026-11-30 01:18:13 3152:3152 SyncActivityProfilerHandler.cpp:52] profiler_start\n"
    )
    assert KINETO_LINE.sub(b"", line + b"USDT: not a kineto line\n") == b"USDT: not a kineto line\n"
