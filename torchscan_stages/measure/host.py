"""What the host did while a timing ran: load, other busy processes, preemption of our blocks.

Why: on a shared machine other jobs take the CPU away from a timed block. That shows as
involuntary context switches and as process CPU time falling behind wall time, so each
block is probed (outside its timed region: process CPU time and getrusage's involuntary
switches, a few microseconds) and classified, and the run as a whole records the load
average at start and end, how many other processes competed (psutil) and what the kernel
accounted (:mod:`.pressure`: PSI, steal, runnable tasks, usable cores).
"""

from __future__ import annotations

import datetime
import glob
import hashlib
import os
import platform
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import psutil

from ..report import BlockOutlier, Diagnostic, HostPressure, HostState, LatencyNoise
from ..stats import quartiles
from . import pressure
from .latency_options import Probe

BUSY_PROCESS_PERCENT = 50.0  # another process using >= half a core during the run is busy
DESCHEDULED_FRACTION = 0.9  # a block whose CPU/wall fell below 0.9 x the typical one
FAR_OUT = 3.0  # Tukey's far-out fence: beyond q3 + 3 IQR (or below q1 - 3 IQR)
LOAD_CHANGE = 1.0  # one more (or fewer) runnable process on average
CPU_FRACTION_DRIFT = 0.1
PREEMPTED_SHARE_DRIFT = 0.3  # share of blocks with involuntary switches, first vs last third
LOADED_PSI_SHARE = 0.5  # runnable tasks waited for a CPU more than half of the timing


def process_probe() -> Probe:
    """A probe of this process: CPU time of all its threads (CLOCK_PROCESS_CPUTIME_ID, ns
    resolution; psutil's cpu_times counts 10 ms clock ticks, coarser than a 1 ms block) and
    involuntary context switches (getrusage; psutil's count where getrusage is missing)."""
    try:
        import resource
    except ImportError:  # not on Windows
        process = psutil.Process()

        def fallback() -> tuple[float, int]:
            return time.process_time(), process.num_ctx_switches().involuntary

        return fallback

    def probe() -> tuple[float, int]:
        return time.process_time(), resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw

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
        block_cpu_fraction=[round(value, 4) for value in fractions],
        block_involuntary_switches=list(trace.involuntary),
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


@dataclass
class _Seen:
    """Another process seen at the start of a timing (primed for psutil's CPU percent)."""

    process: psutil.Process
    nice: int


def _nice(process: psutil.Process) -> int:
    try:
        return int(process.nice())
    except (psutil.Error, OSError, TypeError, ValueError):
        return 0


class HostMonitor:
    """Host state around one timing: call :meth:`finish` when the timing ends.

    Other busy processes are those that used at least half of a fair share of the usable
    cores between start and finish (a fixed half core missed every competitor of a host at
    load 26 on 2 cores, where each gets 2/27 of a core); processes started during the
    timing count with their CPU time since they started. The kernel's own accounting (PSI,
    steal, runnable tasks, usable cores) goes into ``HostState.pressure``.
    """

    def __init__(self) -> None:
        self._load_start = _load_average()
        self._kernel_start = pressure.snapshot()
        self._wall_start = time.monotonic()
        self._me = os.getpid()
        self._others: dict[int, _Seen] = {}
        for process in psutil.process_iter():
            if process.pid == self._me:
                continue
            try:
                process.cpu_percent(None)  # primes the interval measurement
            except (psutil.Error, OSError):
                continue
            self._others[process.pid] = _Seen(process, _nice(process))
        self._started_at = _now()
        self._epoch_start = time.time()

    def _percents(self) -> list[tuple[float, int]]:
        """(CPU percent over the timing, nice) of every other process seen at the end."""
        found: list[tuple[float, int]] = []
        now = time.time()
        for process in psutil.process_iter():
            if process.pid == self._me:
                continue
            try:
                seen = self._others.get(process.pid)
                if seen is not None:
                    found.append((seen.process.cpu_percent(None), seen.nice))
                    continue
                with process.oneshot():
                    born = max(process.create_time(), self._epoch_start)
                    times = process.cpu_times()
                    nice = _nice(process)
                alive = now - born
                if alive > 0.05:
                    found.append((100.0 * (times.user + times.system) / alive, nice))
            except (psutil.Error, OSError):
                continue
        return found

    def finish(self) -> HostState:
        load_end = _load_average()
        cpus = psutil.cpu_count(logical=True)
        kernel_end = pressure.snapshot()
        wall = time.monotonic() - self._wall_start
        affinity = pressure.affinity_cpus()
        quota = pressure.cgroup_quota_cpus()
        usable = pressure.usable_cpus(affinity, quota, cpus)
        running = [
            snap.stat.procs_running
            for snap in (self._kernel_start, kernel_end)
            if snap.stat is not None and snap.stat.procs_running is not None
        ]
        threshold = busy_threshold(usable, load_end, max(running) if running else None)
        percents = self._percents()
        busy, niced = count_busy(percents, threshold)
        delta = pressure.pressure_between(self._kernel_start, kernel_end, wall)
        psi = kernel_end.psi
        state = HostPressure(
            usable_cpus=usable,
            affinity_cpus=affinity,
            cgroup_quota_cpus=quota,
            psi_some_share=delta.psi_some_share,
            psi_full_share=delta.psi_full_share,
            psi_some_avg10=psi.some_avg10 if psi else None,
            psi_some_avg60=psi.some_avg60 if psi else None,
            psi_full_avg10=psi.full_avg10 if psi else None,
            psi_full_avg60=psi.full_avg60 if psi else None,
            steal_share=delta.steal_share,
            procs_running=max(running) if running else None,
            other_cpu_cores=round(sum(percent for percent, _ in percents) / 100.0, 3),
            niced_busy_processes=niced,
            busy_percent_threshold=round(threshold, 2),
        )
        return HostState(
            logical_cpus=cpus,
            load_average_start=self._load_start,
            load_average_end=load_end,
            cpu_governor=cpu_governor(),
            busy_processes=busy,
            loaded=is_loaded(busy, load_end, usable, state.psi_some_share),
            host_id=host_id(),
            started_at=self._started_at,
            finished_at=_now(),
            pressure=state,
        )


def count_busy(percents: Sequence[tuple[float, int]], threshold: float) -> tuple[int, int]:
    """(busy, niced busy) among (CPU percent, nice) of the other processes."""
    busy = [nice for percent, nice in percents if percent >= threshold]
    return len(busy), sum(1 for nice in busy if nice > 0)


def busy_threshold(
    usable: float | None, load_end: list[float] | None, running: int | None
) -> float:
    """CPU percent that makes another process busy: half a fair share of the usable cores
    among the runnable tasks (load average or procs_running, whichever is larger), at most
    half a core. At load 26 on 2 usable cores: 0.5 x 100 x 2 / 26 = 3.8%."""
    cores = usable if usable else 1.0
    contenders = max(cores, load_end[0] if load_end else 0.0, float(running or 0))
    return min(BUSY_PROCESS_PERCENT, 0.5 * 100.0 * cores / contenders)


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


def is_loaded(
    busy: int | None,
    load_end: list[float] | None,
    cpus: float | None,
    psi_some_share: float | None = None,
) -> bool:
    """This process plus the other busy ones exceed the usable cores, or the 1-minute load
    does, or runnable tasks waited for a CPU more than half of the time (PSI some)."""
    if psi_some_share is not None and psi_some_share > LOADED_PSI_SHARE:
        return True
    if cpus is None:
        return False
    if busy is not None and busy + 1 > cpus:
        return True
    return load_end is not None and load_end[0] > cpus


def pressure_text(host: HostState) -> str:
    """The measured pressure in one line, for diagnostics and refusals."""
    parts = [
        f"load average {host.load_average_start} -> {host.load_average_end}",
        f"{host.busy_processes} other busy process(es)",
    ]
    found = host.pressure
    cores = found.usable_cpus if found and found.usable_cpus else host.logical_cpus
    parts[-1] += f" on {cores:g} usable CPU(s)" if cores else ""
    if found is not None:
        if found.niced_busy_processes:
            parts.append(f"{found.niced_busy_processes} of them niced")
        if found.psi_some_share is not None:
            parts.append(f"PSI cpu some {found.psi_some_share:.0%} of the time")
        if found.steal_share:
            parts.append(f"steal {found.steal_share:.1%}")
        if found.procs_running is not None:
            parts.append(f"{found.procs_running} runnable task(s)")
        if found.other_cpu_cores is not None:
            parts.append(f"other processes used {found.other_cpu_cores:.2f} core(s)")
    return ", ".join(parts)


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
                    f"timing ran on a loaded host ({pressure_text(host)}); absolute times "
                    "are inflated, compare only interleaved runs"
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
