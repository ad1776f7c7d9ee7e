"""Timing stages take one host-wide lock and count the timing jobs that shared the host."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from torchscan_stages.pipeline import hostlock

TRY_LOCK = """
import fcntl, sys
with open(sys.argv[1], "a+") as handle:
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print("busy")
    else:
        print("free")
"""


def _try_lock(folder: Path) -> str:
    """Another process asks for the lock without waiting: no clock involved."""
    result = subprocess.run(
        [sys.executable, "-c", TRY_LOCK, str(folder / "lock")],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return result.stdout.strip()


def test_a_timing_stage_holds_the_host_lock_and_counts_live_jobs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(hostlock.LOCK_ENV, str(tmp_path))
    waiting = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        (tmp_path / f"job-{waiting.pid}").write_text("latency")  # a live job waiting its turn
        dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True)  # fmt: skip
        (tmp_path / f"job-{dead.stdout.strip()}").write_text("rss")  # its process is gone
        with hostlock.timing_slot("latency") as share:
            assert share is not None and share.locked
            assert _try_lock(tmp_path) == "busy"  # no other timing job can measure now
            diagnostic = share.diagnostic()
        assert diagnostic.code == "timing_host_share" and diagnostic.severity == "info"
        assert diagnostic.count == 2  # this job + the live waiting one; the dead one is not
        assert hostlock.last_share() == 2
        assert _try_lock(tmp_path) == "free"  # released on leaving
        assert not (tmp_path / f"job-{os.getpid()}").exists()
    finally:
        waiting.kill()
        waiting.wait()


def test_non_timing_stages_take_no_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(hostlock.LOCK_ENV, str(tmp_path))
    with hostlock.timing_slot("crawl") as share:
        assert share is None
        assert _try_lock(tmp_path) == "free"  # crawl, flops, memory jobs fan out freely


def test_lock_off_says_timing_jobs_may_have_run_concurrently(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(hostlock.LOCK_ENV, "off")
    monkeypatch.setattr(hostlock.tempfile, "gettempdir", lambda: str(tmp_path))
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        folder = tmp_path / "torchscan_stages-timing"
        folder.mkdir()
        (folder / f"job-{other.pid}").write_text("latency")
        with hostlock.timing_slot("latency") as share:
            assert share is not None and not share.locked
            diagnostic = share.diagnostic()
        assert diagnostic.severity == "warning" and diagnostic.count == 2  # 1 other + itself
        assert "concurrently" in diagnostic.message
    finally:
        other.kill()
        other.wait()


HOLD_LOCK = """
import sys, time
from pathlib import Path
from torchscan_stages.pipeline import hostlock
with hostlock.timing_slot("rss"):
    print("held", flush=True)
    time.sleep(float(sys.argv[1]))
"""


def test_a_waiting_job_names_the_holder_and_its_age(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(hostlock.LOCK_ENV, str(tmp_path))
    monkeypatch.setenv(hostlock.PROGRESS_ENV, "0.2")  # a line every 0.2 s instead of 15
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, "3"], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with hostlock.timing_slot("latency") as share:  # waits until the holder leaves
            assert share is not None and share.locked
        lines = capsys.readouterr().err.splitlines()
    finally:
        holder.kill()
        holder.communicate()  # reaps it and closes its stdout pipe
    assert lines, "no progress line while waiting"
    assert all(line.startswith("latency: waiting ") for line in lines), lines
    assert f"in {tmp_path}, held by PID {holder.pid} (rss) since " in lines[0]
    assert "TORCHSCAN_TIMING_LOCK=off" in lines[0]


def test_the_waiting_line_without_a_holder_record(tmp_path: Path) -> None:
    line = hostlock.waiting_line("compare", tmp_path, 30.4)
    assert line.startswith(f"compare: waiting 30 s for the timing lock in {tmp_path}, ")
    assert "its holder left no record" in line
