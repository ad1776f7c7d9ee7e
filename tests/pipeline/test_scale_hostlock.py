"""Timing stages take one host-wide lock and count the timing jobs that shared the host."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

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
    assert f"in {tmp_path}, held by PID {holder.pid} (rss in {os.getcwd()}) since " in lines[0]
    assert "TORCHSCAN_TIMING_LOCK=off" in lines[0]


def test_the_waiting_line_without_a_holder_record(tmp_path: Path) -> None:
    line = hostlock.waiting_line("compare", tmp_path, 30.4)
    assert line.startswith(f"compare: waiting 30 s for the timing lock in {tmp_path}, ")
    assert "its holder left no record" in line


class _FakeClock(hostlock.Clock):
    """Ten seconds pass at every sleep; the held lock is let go after ``release_after``."""

    def __init__(self, release: Any, release_after: int) -> None:
        self.t, self.sleeps, self.lines = 0.0, 0, []  # type: ignore[misc]
        self._release, self._after = release, release_after
        super().__init__(now=lambda: self.t, sleep=self._sleep, emit=self.lines.append)

    def _sleep(self, seconds: float) -> None:
        self.t += 10.0
        self.sleeps += 1
        if self.sleeps == self._after:
            self._release()


def test_a_waiting_job_says_so_once_then_at_most_once_a_minute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(hostlock.LOCK_ENV, str(tmp_path))
    monkeypatch.delenv(hostlock.PROGRESS_ENV, raising=False)
    held = open(tmp_path / "lock", "a+")  # noqa: SIM115 (another open file: flock conflicts)
    fcntl.flock(held.fileno(), fcntl.LOCK_EX)
    (tmp_path / hostlock.HOLDER).write_text(
        json.dumps({"pid": 4242, "stage": "compare", "since": "2026-12-03T05:00:00+00:00",
                    "checkout": "/work/other"})
    )  # fmt: skip
    clock = _FakeClock(lambda: fcntl.flock(held.fileno(), fcntl.LOCK_UN), release_after=19)
    try:
        with hostlock.timing_slot("rss", clock) as share:
            assert share is not None
    finally:
        held.close()
    # 19 sleeps of 10 s = 190 s of waiting: the first line at 0 s, then one at 60, 120, 180
    # (at most one a minute), where the old loop printed one every 15 s (13 lines)
    assert [line.split(" for the timing lock")[0] for line in clock.lines] == [
        "rss: waiting", "rss: waiting 60 s", "rss: waiting 120 s", "rss: waiting 180 s",
    ]  # fmt: skip
    assert "held by PID 4242 (compare in /work/other) since 05:00:00 UTC" in clock.lines[0]
    # the report records the wait and whom it waited for
    assert share.waited_s == 190.0 and share.waited_for is not None
    waited = share.diagnostics()[1]
    assert waited.code == "timing_lock_waited" and waited.count == 190
    assert "waited 190 s for the timing lock" in waited.message
    assert "held by PID 4242 (compare in /work/other)" in waited.message


HOLD_UNTIL_TOLD = """
import sys
from torchscan_stages.pipeline import hostlock
with hostlock.timing_slot("compare"):
    print("held", flush=True)
    sys.stdin.readline()  # "times" until the test says it is done
"""


def _lock_state(folder: Path) -> str:
    """busy/free, asked through another open file (flock: it conflicts in one process too)."""
    with open(folder / "lock", "a+") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return "busy"
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        return "free"


def test_a_second_checkouts_timing_stage_waits_only_while_the_first_times(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checkout A times (holds the lock) until told; checkout B runs the real latency stage
    body: it imports and builds while A times, waits (one line) only until A is done, times
    with the lock, and writes without it. No duration is read: A is released by B's line."""
    import yaml

    import torchscan_stages.measure.latency as latency_module
    import torchscan_stages.pipeline.workload as workload_module
    from torchscan_stages.pipeline.runner import StageContext, run_context
    from torchscan_stages.pipeline.schema import config_section, validate_config
    from torchscan_stages.stages import latency

    root = Path(__file__).resolve().parents[2]
    folder, other_checkout = tmp_path / "lock", tmp_path / "other"
    other_checkout.mkdir()
    monkeypatch.setenv(hostlock.LOCK_ENV, str(folder))
    first = subprocess.Popen(
        [sys.executable, "-c", HOLD_UNTIL_TOLD], cwd=other_checkout, text=True,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(root)},
    )  # fmt: skip
    events: list[tuple[str, str]] = []

    def on_wait(line: str) -> None:  # B found the lock held: A finishes its timing now
        events.append(("wait", line))
        assert first.stdin is not None
        first.stdin.write("done\n")
        first.stdin.flush()

    def spy(name: str, real: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            events.append((name, _lock_state(folder)))
            return real(*args, **kwargs)

        return call

    real_clock = hostlock.Clock
    monkeypatch.setattr(hostlock, "Clock", lambda: real_clock(emit=on_wait))
    monkeypatch.setattr(
        workload_module, "build_workload", spy("build", workload_module.build_workload)
    )
    monkeypatch.setattr(
        latency_module, "measure_latency", spy("time", latency_module.measure_latency)
    )
    monkeypatch.setattr(StageContext, "write_report", spy("write", StageContext.write_report))
    raw = yaml.safe_load((root / "params.yaml").read_text(encoding="utf-8"))
    raw["latency"] = {"warmup": 0.0, "min_run_time": 0.01, "max_run_time": 0.05}
    config = validate_config(raw)
    run = run_context("latency", raw, latency.KEYS)
    ctx = StageContext("latency", config, config_section(raw, latency.KEYS), tmp_path, run)
    try:
        assert first.stdout is not None and first.stdout.readline() == "held\n"
        latency.run(ctx)
    finally:
        first.kill()
        first.communicate()
    # build while A held the lock (B did not wait for it); one waiting line, naming A; time
    # with the lock (B's own: A was done); write with the lock free again
    assert [name for name, _ in events] == ["build", "wait", "time", "write"]
    assert events[0][1] == "busy" and events[2][1] == "busy" and events[3][1] == "free"
    holder = f"held by PID {first.pid} (compare in {other_checkout})"
    assert holder in events[1][1]
    assert ctx.host_share is not None and holder in (ctx.host_share.waited_for or "")
    assert "timing_lock_waited" in ctx.pending[ctx.report_path()]  # the report says it too
