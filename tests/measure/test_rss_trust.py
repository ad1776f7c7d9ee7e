"""measure_peak_rss trusts the OS, not the child: claims above the OS's own figure are refused,
and the child's whole descendant tree (also a setsid'd daemon) is gone on return."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import psutil
import pytest

from torchscan_stages.measure.rss import measure_peak_rss

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux subreaper")

CLAIM = (
    "import json, os\n"
    "with open(os.environ['TORCHSCAN_STAGES_RSS_PHASE_FILE'], 'a') as f:\n"
    "    f.write(json.dumps({'name': 'forged', 'peak_bytes': 10**15, 'reset': False}) + '\\n')\n"
)

# fork; the child setsid()s (a new session: out of the launcher's process group) and forks
# again; the grandchild writes its pid and sleeps: a daemon the caller never sees
DAEMON = (
    "import os, sys, time\n"
    "if os.fork() == 0:\n"
    "    os.setsid()\n"
    "    if os.fork() == 0:\n"
    "        with open(sys.argv[1] + '.tmp', 'w') as f:\n"
    "            f.write(str(os.getpid()))\n"
    "        os.replace(sys.argv[1] + '.tmp', sys.argv[1])\n"
    "        time.sleep(120)\n"
    "    os._exit(0)\n"
    "while not os.path.exists(sys.argv[1]):\n"
    "    time.sleep(0.01)\n"
)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@linux_only
def test_a_phase_claim_above_the_os_figure_is_never_complete() -> None:
    report = measure_peak_rss([sys.executable, "-c", CLAIM], timeout=60)
    rss = report.rss
    assert rss is not None
    # the OS saw a small Python (tens of MiB), the child claimed 10**15 bytes (about 888 TiB)
    assert rss.peak.known_value is not None and rss.peak.known_value < 2**30
    assert rss.peak.status == "partial"
    (forged,) = rss.phases
    assert forged.name == "forged" and forged.peak_rss.status == "unavailable"
    (refused,) = [d for d in report.diagnostics if d.code == "rss_phase_above_os"]
    assert "claims a peak of 1000000000000000 bytes" in refused.message
    # unwitnessed (a record naming no process): refused, but it could be a grandchild's
    # true claim outside the handshake, so a warning; the peak is partial either way
    assert refused.severity == "warning" and "did not witness it" in refused.message


@linux_only
def test_a_setsid_grandchild_is_ended_on_return(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    report = measure_peak_rss([sys.executable, "-c", DAEMON, str(pidfile)], timeout=60)
    assert report.rss is not None and report.rss.exit_code == 0
    grandchild = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild), "the setsid'd grandchild outlived measure_peak_rss"


@linux_only
def test_a_setsid_grandchild_is_ended_on_timeout(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    command = [sys.executable, "-c", DAEMON + "time.sleep(120)\n", str(pidfile)]
    report = measure_peak_rss(command, timeout=3)
    assert report.rss is not None and report.rss.timed_out
    grandchild = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild)
    assert os.getpid() != grandchild


@linux_only
def test_a_witnessed_claim_above_the_parents_own_reading_is_an_error() -> None:
    # a record naming the child itself: the parent reads that process's VmHWM (tens of MiB)
    # and the claim of 10**15 bytes contradicts it, which is an error, not merely unseen. The
    # child waits for the parent's reading as mark_phase does (on a loaded host, a child that
    # exited first left no process to read, and the claim was only "unwitnessed")
    script = CLAIM.replace("'reset': False", "'reset': False, 'pid': os.getpid()") + (
        "from torchscan_stages.measure import rss_phases\n"
        "fd = rss_phases._parent_pipe()\n"
        "assert fd is not None, 'no acknowledgement pipe from the parent'\n"
        "rss_phases._await_parent(fd)\n"
    )
    report = measure_peak_rss([sys.executable, "-c", script], timeout=60)
    assert report.rss is not None and report.rss.peak.status == "partial"
    (refused,) = [d for d in report.diagnostics if d.code == "rss_phase_above_os"]
    assert refused.severity == "error"
    assert "above the parent's own reading of that process's VmHWM" in refused.message
