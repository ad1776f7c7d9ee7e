"""One timing job at a time per host, and a count of the timing jobs that shared the host.

Timing stages (latency, rss, profile, compare) measure the machine as well as the model:
two of them running at once on one host disturb each other. Whatever launcher started
them (joblib, submitit, Ray, several DVC queue workers), a timing stage registers in a
host-wide folder and takes an exclusive ``flock`` there around its timed work only
(``StageContext.timed``: not its imports, model builds or writes), so timing jobs on one
host measure one after the other while everything else, crawl, flops and memory jobs
included, still fans out. Each report records, as a ``timing_host_share`` diagnostic, how
many timing jobs were on the host (waiting or measuring) and whether the lock kept them
apart, and, as ``timing_lock_waited``, how long it waited and for whom.

``TORCHSCAN_TIMING_LOCK`` sets the folder (one per host; the default is in the system's
temporary folder); ``TORCHSCAN_TIMING_LOCK=off`` lets timing jobs run concurrently, and the
reports then say how many shared the host. Host-wide, not per checkout, by default: two
clones timing at once on one machine disturb each other exactly as two jobs of one sweep
do, and a per-checkout lock would let both claim "kept apart" (docs/scale-out.md).

A job that waits says so: one stderr line as soon as it finds the lock held, naming the
lock's folder, the holder's PID, stage and checkout and since when it holds the lock (the
holder writes ``holder.json`` beside the lock once it has it), then the same line at most
every ``TORCHSCAN_LOCK_PROGRESS_S`` seconds (60) while it still waits.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LOCK_ENV = "TORCHSCAN_TIMING_LOCK"
PROGRESS_ENV = "TORCHSCAN_LOCK_PROGRESS_S"
HOLDER = "holder.json"
TIMING_STAGES = frozenset({"latency", "rss", "profile", "compare", "serve"})
_last: int | None = None


@dataclass
class HostShare:
    """Timing jobs seen on this host while this one measured (itself included), and how
    long it waited for the lock and for whom (``waited_for``: the holder it first saw)."""

    folder: Path
    locked: bool
    jobs: int = 1
    waited_s: float = 0.0
    waited_for: str | None = None
    timing: bool = True  # inside the slot: later arrivals did not share its timed work

    def refresh(self) -> int:
        if self.timing:
            self.jobs = max(self.jobs, _registered(self.folder))
        global _last
        _last = self.jobs
        return self.jobs

    def diagnostic(self) -> Any:
        from ..report import Diagnostic

        jobs = self.refresh()
        others = jobs - 1
        if self.locked:
            how = "the host lock kept them apart: none measured at the same time as this one"
        else:
            how = f"the host lock was off ({LOCK_ENV}=off): they may have measured concurrently"
        return Diagnostic(
            code="timing_host_share",
            severity="warning" if others and not self.locked else "info",
            count=jobs,
            message=f"{jobs} timing job(s) on host {os.uname().nodename} ({others} besides "
            f"this one); {how}",
        )

    def diagnostics(self) -> list[Any]:
        """``timing_host_share``, and ``timing_lock_waited`` when it waited for the lock."""
        from ..report import Diagnostic

        found = [self.diagnostic()]
        if self.waited_for is not None:
            found.append(
                Diagnostic(
                    code="timing_lock_waited",
                    severity="info",
                    count=round(self.waited_s),
                    message=f"waited {self.waited_s:.0f} s for the timing lock in "
                    f"{self.folder}, {self.waited_for} when it started waiting; the lock is "
                    "held only around timed work",
                )
            )
        return found


def lock_folder() -> Path | None:
    """The host-wide folder of the timing lock; ``None`` when switched off."""
    value = os.environ.get(LOCK_ENV, "")
    if value.lower() == "off":
        return None
    return Path(value) if value else _default_folder()


def _default_folder() -> Path:
    return Path(tempfile.gettempdir()) / "torchscan_stages-timing"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _registered(folder: Path) -> int:
    """Timing jobs registered in ``folder`` whose process still lives."""
    count = 0
    for entry in folder.glob("job-*"):
        pid = entry.name.removeprefix("job-")
        if pid.isdigit() and _alive(int(pid)):
            count += 1
    return count


def last_share() -> int | None:
    """The count recorded by this process's latest timing slot (None: it had none)."""
    return _last


HEARTBEAT_S = 60.0


def _progress_interval() -> float:
    try:
        return max(0.1, float(os.environ.get(PROGRESS_ENV, str(HEARTBEAT_S))))
    except ValueError:
        return HEARTBEAT_S


def _write_holder(folder: Path, stage: str) -> None:
    """Who holds the lock and since when, for the jobs that wait (replaced atomically)."""
    since = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    record = {"pid": os.getpid(), "stage": stage, "since": since, "checkout": os.getcwd()}
    tmp = folder / f".{HOLDER}.{os.getpid()}"
    tmp.write_text(json.dumps(record), encoding="utf-8")
    os.replace(tmp, folder / HOLDER)


def holder_text(folder: Path) -> str:
    """``held by PID 12 (rss in /work/a) since 12:01:02 UTC (47 s ago)``, from holder.json."""
    try:
        holder = json.loads((folder / HOLDER).read_text(encoding="utf-8"))
        since = datetime.datetime.fromisoformat(str(holder["since"]))
        age = (datetime.datetime.now(datetime.timezone.utc) - since).total_seconds()
        where = f" in {holder['checkout']}" if holder.get("checkout") else ""
        return (
            f"held by PID {holder['pid']} ({holder.get('stage', '?')}{where}) since "
            f"{since:%H:%M:%S} UTC ({age:.0f} s ago)"
        )
    except (OSError, ValueError, KeyError, TypeError):
        return "its holder left no record"


def waiting_line(stage: str, folder: Path, waited_s: float, holder: str | None = None) -> str:
    """``latency: waiting 15 s for the timing lock in F, held by PID 12 (rss) since ...``."""
    who = holder if holder is not None else holder_text(folder)
    waited = f" {waited_s:.0f} s" if waited_s >= 1 else ""
    return (
        f"{stage}: waiting{waited} for the timing lock in {folder}, {who}; timing "
        f"jobs on one host measure one at a time ({LOCK_ENV}=off lifts that)"
    )


@dataclass(frozen=True)
class Clock:
    """What waiting reads and does: injected in tests, the real ones otherwise."""

    now: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    emit: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True)


def _acquire(handle: Any, folder: Path, stage: str, clock: Clock) -> tuple[float, str | None]:
    """Take the exclusive lock: (seconds waited, the holder first seen; None: it was free).

    One line as soon as the lock is found held, then one at most every progress interval.
    """
    interval = _progress_interval()
    start = clock.now()
    first: str | None = None
    due = start
    while True:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            return clock.now() - start, first
        except BlockingIOError:
            pass
        now = clock.now()
        if now >= due:
            holder = holder_text(folder)
            first = first if first is not None else holder
            clock.emit(waiting_line(stage, folder, now - start, holder))
            due = now + interval
        clock.sleep(min(0.2, interval))


@contextlib.contextmanager
def timing_slot(stage: str, clock: Clock | None = None) -> Iterator[HostShare | None]:
    """Register, wait for the host's timing lock, time; ``None`` for non-timing stages.

    Wrap the timed work only (``StageContext.timed``): every second inside is a second
    another checkout's timing stage may wait.
    """
    if stage not in TIMING_STAGES:
        yield None
        return
    configured = lock_folder()
    folder = configured or _default_folder()  # off: still counted, in the default folder
    folder.mkdir(parents=True, exist_ok=True)
    presence = folder / f"job-{os.getpid()}"
    presence.write_text(stage, encoding="utf-8")
    handle = open(folder / "lock", "a+") if configured else None  # noqa: SIM115
    try:
        share = HostShare(folder, locked=handle is not None)
        if handle is not None:
            # waits while another job times, saying so
            share.waited_s, share.waited_for = _acquire(handle, folder, stage, clock or Clock())
            _write_holder(folder, stage)
        share.refresh()
        yield share
        share.refresh()
        share.timing = False
    finally:
        if handle is not None:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
            handle.close()
        with contextlib.suppress(OSError):
            presence.unlink()
