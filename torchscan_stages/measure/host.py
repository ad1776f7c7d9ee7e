"""What the host did while a timing ran: load, other busy processes, preemption of our blocks.

Why: on a shared machine other jobs take the CPU away from a timed block. That shows as
involuntary context switches and as process CPU time falling behind wall time, so each
block is probed (outside its timed region) and classified, and the run as a whole records
the load average at start and end and how many other processes kept a core busy. All of it
goes through psutil (one ``Process`` read per probe, about 20 us, never inside a timed
region).
"""

from __future__ import annotations

import datetime
import glob
import hashlib
import os
import platform
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import psutil

from ..report import BlockOutlier, Diagnostic, HostState, LatencyNoise
from ..stats import quartiles
from .latency_options import Probe

BUSY_PROCESS_PERCENT = 50.0  # another process using >= half a core during the run is busy
DESCHEDULED_FRACTION = 0.9  # a block whose CPU/wall fell below 0.9 x the typical one
FAR_OUT = 3.0  # Tukey's far-out fence: beyond q3 + 3 IQR (or below q1 - 3 IQR)
LOAD_CHANGE = 1.0  # one more (or fewer) runnable process on average
CPU_FRACTION_DRIFT = 0.1
PREEMPTED_SHARE_DRIFT = 0.3  # share of blocks with involuntary switches, first vs last third


def process_probe() -> Probe:
    """A probe of this process through psutil (CPU time of all threads, involuntary switches)."""
    process = psutil.Process()

    def probe() -> tuple[float, int]:
        with process.oneshot():
            times = process.cpu_times()
            switches = process.num_ctx_switches()
        return times.user + times.system, switches.involuntary

    return probe


@dataclass
class BlockTrace:
    """Per-block probe readings beside the block times (same index)."""

    wall_s: list[float] = field(default_factory=list)
    cpu_s: list[float] = field(default_factory=list)
    involuntary: list[int] = field(default_factory=list)

    def add(self, before: tuple[float, int], after: tuple[float, int], wall: float) -> None:
        self.wall_s.append(wall)
        self.cpu_s.append(after[0] - before[0])
        self.involuntary.append(after[1] - before[1])

    def clear(self) -> None:
        self.wall_s.clear()
        self.cpu_s.clear()
        self.involuntary.clear()


def _fractions(trace: BlockTrace) -> list[float]:
    return [
        cpu / wall if wall > 0 else 0.0 for cpu, wall in zip(trace.cpu_s, trace.wall_s, strict=True)
    ]


def classify_blocks(blocks: Sequence[float], trace: BlockTrace | None) -> LatencyNoise:
    """Outliers among per-call block averages, kept by index (the blocks stay in the report).

    ``descheduled``: the block had involuntary context switches and its CPU/wall fraction
    fell below 0.9 x the median block's (the CPU was taken away). ``slow``/``fast``: beyond
    Tukey's far-out fences (q3 + 3 IQR, q1 - 3 IQR) without a sign of preemption.
    """
    probed = trace is not None and len(trace.wall_s) == len(blocks) and len(blocks) > 0
    fractions = _fractions(trace) if probed and trace is not None else []
    typical = quartiles(fractions)[1] if fractions else 0.0
    q1, _, q3 = quartiles(blocks) if blocks else (0.0, 0.0, 0.0)
    spread = q3 - q1
    outliers: list[BlockOutlier] = []
    for index, value in enumerate(blocks):
        kind: str | None = None
        if (
            fractions
            and trace is not None
            and trace.involuntary[index] > 0
            and fractions[index] < DESCHEDULED_FRACTION * typical
        ):
            kind = "descheduled"
        elif value > q3 + FAR_OUT * spread and spread > 0:
            kind = "slow"
        elif value < q1 - FAR_OUT * spread and spread > 0:
            kind = "fast"
        if kind is not None:
            outliers.append(BlockOutlier(index=index, kind=kind, seconds=value))  # type: ignore[arg-type]
    if not probed or trace is None:
        return LatencyNoise(outliers=outliers)
    total_wall = sum(trace.wall_s)
    third = max(1, len(fractions) // 3)
    drift = abs(sum(fractions[:third]) / third - sum(fractions[-third:]) / third)
    preempted = [1.0 if count > 0 else 0.0 for count in trace.involuntary]
    switch_drift = abs(sum(preempted[:third]) / third - sum(preempted[-third:]) / third)
    return LatencyNoise(
        outliers=outliers,
        involuntary_switches=sum(trace.involuntary),
        cpu_fraction=sum(trace.cpu_s) / total_wall if total_wall > 0 else None,
        load_changed=len(fractions) >= 6
        and (drift > CPU_FRACTION_DRIFT or switch_drift > PREEMPTED_SHARE_DRIFT),
    )


def cpu_governor() -> str | None:
    """The CPU frequency governor(s) where Linux exposes them (e.g. 'performance')."""
    names: set[str] = set()
    for path in glob.glob("/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor"):
        try:
            with open(path, encoding="ascii") as handle:
                names.add(handle.read().strip())
        except OSError:
            continue
    return ",".join(sorted(names)) or None


def _load_average() -> list[float] | None:
    try:
        return [round(value, 2) for value in psutil.getloadavg()]
    except (OSError, AttributeError):
        return None


class HostMonitor:
    """Host state around one timing: call :meth:`finish` when the timing ends.

    Other busy processes are those that used at least half a core between start and finish
    (psutil's per-process CPU percent over that interval), excluding this process.
    """

    def __init__(self) -> None:
        self._load_start = _load_average()
        self._me = os.getpid()
        self._others: list[psutil.Process] = []
        for process in psutil.process_iter():
            if process.pid == self._me:
                continue
            try:
                process.cpu_percent(None)  # primes the interval measurement
            except (psutil.Error, OSError):
                continue
            self._others.append(process)
        self._started_at = _now()

    def finish(self) -> HostState:
        busy = 0
        for process in self._others:
            try:
                if process.cpu_percent(None) >= BUSY_PROCESS_PERCENT:
                    busy += 1
            except (psutil.Error, OSError):
                continue
        load_end = _load_average()
        cpus = psutil.cpu_count(logical=True)
        return HostState(
            logical_cpus=cpus,
            load_average_start=self._load_start,
            load_average_end=load_end,
            cpu_governor=cpu_governor(),
            busy_processes=busy,
            loaded=is_loaded(busy, load_end, cpus),
            host_id=host_id(),
            started_at=self._started_at,
            finished_at=_now(),
        )


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")


def host_id() -> str:
    """This machine, without writing its name into reports: 12 hex of sha256(hostname)."""
    return hashlib.sha256(platform.node().encode("utf-8")).hexdigest()[:12]


def overlapping_timings(timings: Iterable[tuple[str, HostState | None]]) -> list[tuple[str, str]]:
    """Pairs of named timings that ran at the same time on the same host.

    Timing jobs that share a host disturb each other; a sweep summary warns with these
    pairs. Timings without host state (injected clocks, older reports) are skipped.
    """
    known = [
        (name, host.host_id, host.started_at, host.finished_at)
        for name, host in timings
        if host is not None and host.host_id and host.started_at and host.finished_at
    ]
    pairs: list[tuple[str, str]] = []
    for index, (name, where, start, end) in enumerate(known):
        for other, other_where, other_start, other_end in known[index + 1 :]:
            same_host = where == other_where
            if (
                same_host
                and _parse(start) < _parse(other_end)
                and _parse(other_start) < _parse(end)
            ):
                pairs.append((name, other))
    return pairs


def _parse(stamp: str | None) -> datetime.datetime:
    assert stamp is not None
    return datetime.datetime.fromisoformat(stamp)


def is_loaded(busy: int | None, load_end: list[float] | None, cpus: int | None) -> bool:
    """This process plus the other busy ones exceed the cores, or the 1-minute load does."""
    if cpus is None:
        return False
    if busy is not None and busy + 1 > cpus:
        return True
    return load_end is not None and load_end[0] > cpus


def host_diagnostics(host: HostState, noise: LatencyNoise | None, metric: str) -> list[Diagnostic]:
    """``loaded_host`` and ``load_changed`` warnings for one timing."""
    found: list[Diagnostic] = []
    if host.loaded:
        found.append(
            Diagnostic(
                code="loaded_host",
                severity="warning",
                metric=metric,
                message=(
                    f"timing ran on a loaded host: {host.busy_processes} other busy process(es), "
                    f"load average {host.load_average_start} -> {host.load_average_end} on "
                    f"{host.logical_cpus} logical CPUs; absolute times are inflated, compare "
                    "only interleaved runs"
                ),
            )
        )
    start, end = host.load_average_start, host.load_average_end
    load_moved = start is not None and end is not None and abs(end[0] - start[0]) >= LOAD_CHANGE
    drifted = noise is not None and bool(noise.load_changed)
    if load_moved or drifted:
        why = []
        if load_moved:
            why.append(f"1-minute load average {start[0]} -> {end[0]}")  # type: ignore[index]
        if drifted:
            why.append(
                "between the first and last third of the blocks, their CPU time per wall "
                "second moved by more than 10 points or their share with involuntary context "
                "switches by more than 30 points"
            )
        found.append(
            Diagnostic(
                code="load_changed",
                severity="warning",
                metric=metric,
                message="load changed during the timing (" + "; ".join(why) + ")",
            )
        )
    return found
