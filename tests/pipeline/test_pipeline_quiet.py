"""The profile stage's stderr filter: libkineto's status lines dropped, everything else kept."""

from __future__ import annotations

import subprocess
import sys

from torchscan_stages.pipeline.quiet import KINETO_LINE

SCRIPT = """
import sys, warnings, torch
from torchscan_stages.pipeline.quiet import without_kineto_lines
with without_kineto_lines():
    with torch.profiler.profile():
        torch.randn(3) + 1
    warnings.warn("a real warning")
    print("a message of our own", file=sys.stderr)
"""


def test_kineto_lines_are_dropped_and_other_stderr_kept() -> None:
    bare = subprocess.run(
        [sys.executable, "-c", "import torch\nwith torch.profiler.profile(): torch.randn(3) + 1"],
        capture_output=True,
        check=True,
    )
    assert KINETO_LINE.search(bare.stderr), "torch no longer prints the lines this filter drops"
    filtered = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, check=True)
    assert not KINETO_LINE.search(filtered.stderr)
    assert b"a real warning" in filtered.stderr and b"a message of our own" in filtered.stderr


def test_pattern_matches_only_status_lines() -> None:
    line = (
        b"USDT:2026-11-30 01:18:13 3152:3152 SyncActivityProfilerHandler.cpp:52] profiler_start\n"
    )
    assert KINETO_LINE.sub(b"", line + b"USDT: not a kineto line\n") == b"USDT: not a kineto line\n"
