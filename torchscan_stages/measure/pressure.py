"""What the kernel says about CPU pressure: PSI, steal, runnable tasks, usable cores.

Why: a count of other busy processes seen through /proc misses what a loaded host is made
of (many short-lived or niced competitors, each below half a core; processes in other PID
namespaces). The kernel's own accounting does not: ``/proc/pressure/cpu`` (PSI: the share
of time runnable tasks waited for a CPU), ``/proc/stat`` (steal time taken by a hypervisor,
``procs_running`` system-wide) and the cores this process may use (``sched_getaffinity``
and the cgroup CPU quota). Every read is optional: a field the kernel does not expose stays
None, never 0.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

PSI_CPU = Path("/proc/pressure/cpu")
PROC_STAT = Path("/proc/stat")
CGROUP_V2_MAX = Path("/sys/fs/cgroup/cpu.max")
CGROUP_V1_QUOTA = Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us")
CGROUP_V1_PERIOD = Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us")


@dataclass(frozen=True)
class PsiReading:
    """One read of /proc/pressure/cpu: averages in percent, totals in microseconds."""

    some_avg10: float
    some_avg60: float
    some_total_us: int
    full_avg10: float | None = None
    full_avg60: float | None = None
    full_total_us: int | None = None


@dataclass(frozen=True)
class StatReading:
    """One read of /proc/stat: total and steal jiffies (all CPUs), runnable tasks."""

    total_jiffies: int
    steal_jiffies: int
    procs_running: int | None


@dataclass(frozen=True)
class KernelSnapshot:
    """Everything read at one instant (start or end of a timing)."""

    psi: PsiReading | None
    stat: StatReading | None


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError):
        return None


def parse_psi(text: str) -> PsiReading | None:
    """``some avg10=.. avg60=.. avg300=.. total=..`` (and a ``full`` line on newer kernels)."""
    lines: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        pairs = (item.split("=", 1) for item in rest.split() if "=" in item)
        lines[kind] = {key: value for key, value in pairs}
    some = lines.get("some")
    if not some or not {"avg10", "avg60", "total"} <= set(some):
        return None
    full = lines.get("full")
    has_full = full is not None and {"avg10", "avg60", "total"} <= set(full)
    return PsiReading(
        some_avg10=float(some["avg10"]),
        some_avg60=float(some["avg60"]),
        some_total_us=int(some["total"]),
        full_avg10=float(full["avg10"]) if has_full and full else None,
        full_avg60=float(full["avg60"]) if has_full and full else None,
        full_total_us=int(full["total"]) if has_full and full else None,
    )


def parse_stat(text: str) -> StatReading | None:
    """The aggregate ``cpu`` line (user nice system idle iowait irq softirq steal ...)."""
    total = steal = None
    running = None
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            numbers = [int(value) for value in fields[1:]]
            # guest and guest_nice (fields 9, 10) are already counted in user and nice
            total = sum(numbers[:8])
            steal = numbers[7] if len(numbers) > 7 else 0
        elif fields and fields[0] == "procs_running" and len(fields) > 1:
            running = int(fields[1])
    if total is None or steal is None:
        return None
    return StatReading(total_jiffies=total, steal_jiffies=steal, procs_running=running)


def snapshot() -> KernelSnapshot:
    psi_text, stat_text = _read(PSI_CPU), _read(PROC_STAT)
    return KernelSnapshot(
        psi=parse_psi(psi_text) if psi_text else None,
        stat=parse_stat(stat_text) if stat_text else None,
    )


def parse_quota(v2_max: str | None, v1_quota: str | None, v1_period: str | None) -> float | None:
    """The cgroup CPU quota in cores (``cpu.max`` = "QUOTA PERIOD" or v1 quota/period);
    None when unlimited or unreadable."""
    if v2_max is not None:
        parts = v2_max.split()
        if len(parts) == 2 and parts[0] != "max":
            return int(parts[0]) / int(parts[1])
        return None
    if v1_quota is not None and v1_period is not None:
        quota, period = int(v1_quota.strip()), int(v1_period.strip())
        return quota / period if quota > 0 and period > 0 else None
    return None


def cgroup_quota_cpus() -> float | None:
    return parse_quota(_read(CGROUP_V2_MAX), _read(CGROUP_V1_QUOTA), _read(CGROUP_V1_PERIOD))


def affinity_cpus() -> int | None:
    """The CPUs this process may run on (sched_getaffinity; None where unsupported)."""
    getter = getattr(os, "sched_getaffinity", None)
    if getter is None:
        return None
    try:
        return len(getter(0))
    except OSError:
        return None


def usable_cpus(affinity: int | None, quota: float | None, logical: int | None) -> float | None:
    """The cores this process can actually get: the least of affinity, quota and logical."""
    known = [value for value in (affinity, quota, logical) if value is not None]
    return float(min(known)) if known else None


@dataclass(frozen=True)
class PressureDelta:
    """Pressure between two snapshots, over ``wall_s`` seconds."""

    psi_some_share: float | None
    psi_full_share: float | None
    steal_share: float | None


def pressure_between(start: KernelSnapshot, end: KernelSnapshot, wall_s: float) -> PressureDelta:
    """PSI stall shares (stalled microseconds per wall microsecond) and the steal share of
    all CPU time between two snapshots; None where either side could not be read."""
    some = full = steal = None
    if start.psi is not None and end.psi is not None and wall_s > 0:
        some = _share(end.psi.some_total_us - start.psi.some_total_us, wall_s * 1e6)
        if start.psi.full_total_us is not None and end.psi.full_total_us is not None:
            full = _share(end.psi.full_total_us - start.psi.full_total_us, wall_s * 1e6)
    if start.stat is not None and end.stat is not None:
        jiffies = end.stat.total_jiffies - start.stat.total_jiffies
        if jiffies > 0:
            steal = _share(end.stat.steal_jiffies - start.stat.steal_jiffies, jiffies)
    return PressureDelta(psi_some_share=some, psi_full_share=full, steal_share=steal)


def _share(part: float, whole: float) -> float:
    return round(min(1.0, max(0.0, part / whole)), 4)
