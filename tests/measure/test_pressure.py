"""What the kernel reports about CPU pressure, parsed from injected /proc texts, and the
host section's wire format (old reports without it still load)."""

from __future__ import annotations

import pytest
from simulated_clock import SimulatedClock

from torchscan_stages.measure import pressure
from torchscan_stages.measure.host import (
    HostMonitor,
    busy_threshold,
    count_busy,
    is_loaded,
    pressure_text,
)
from torchscan_stages.measure.latency import measure_latency
from torchscan_stages.render import render_report
from torchscan_stages.report import HostPressure, HostState

PSI = (
    "some avg10=79.89 avg60=44.80 avg300=12.67 total=42284433\n"
    "full avg10=1.50 avg60=0.25 avg300=0.00 total=1000\n"
)
STAT = (
    "cpu  20083 1342 4216 24681 476 0 135 299 0 0\n"
    "cpu0 10000 600 2000 12000 200 0 60 150 0 0\n"
    "procs_running 5\nprocs_blocked 0\n"
)


def test_psi_with_and_without_the_full_line() -> None:
    reading = pressure.parse_psi(PSI)
    assert reading is not None
    assert (reading.some_avg10, reading.some_avg60, reading.some_total_us) == (
        79.89,
        44.8,
        42284433,
    )
    assert (reading.full_avg10, reading.full_total_us) == (1.5, 1000)
    older = pressure.parse_psi(PSI.splitlines()[0])  # kernels before 5.13: no "full" for cpu
    assert older is not None and older.full_avg10 is None and older.full_total_us is None
    assert pressure.parse_psi("garbage") is None


def test_stat_steal_and_runnable_tasks() -> None:
    reading = pressure.parse_stat(STAT)
    assert reading is not None
    # user+nice+system+idle+iowait+irq+softirq+steal = 20083+1342+4216+24681+476+0+135+299
    assert reading.total_jiffies == 51232
    assert reading.steal_jiffies == 299 and reading.procs_running == 5


def test_pressure_between_two_snapshots() -> None:
    start = pressure.KernelSnapshot(
        pressure.PsiReading(0, 0, 1_000_000, 0, 0, 0), pressure.StatReading(1000, 10, 3)
    )
    end = pressure.KernelSnapshot(
        pressure.PsiReading(0, 0, 1_750_000, 0, 0, 250_000), pressure.StatReading(1400, 30, 9)
    )
    delta = pressure.pressure_between(start, end, wall_s=1.0)
    # 750 000 us stalled of 1 000 000 us wall = 75%; full 25%; steal 20 of 400 jiffies = 5%
    assert (delta.psi_some_share, delta.psi_full_share, delta.steal_share) == (0.75, 0.25, 0.05)
    assert (
        pressure.pressure_between(pressure.KernelSnapshot(None, None), end, 1.0).steal_share is None
    )


@pytest.mark.parametrize(
    ("v2", "quota", "period", "cores"),
    [
        ("max 100000", None, None, None),
        ("50000 100000", None, None, 0.5),
        (None, "-1", "100000", None),
        (None, "150000", "100000", 1.5),
        (None, None, None, None),
    ],
)
def test_cgroup_quota_in_cores(
    v2: str | None, quota: str | None, period: str | None, cores: float | None
) -> None:
    assert pressure.parse_quota(v2, quota, period) == cores


def test_usable_cpus_is_the_least_of_affinity_quota_and_logical() -> None:
    assert pressure.usable_cpus(2, 0.5, 8) == 0.5
    assert pressure.usable_cpus(2, None, 8) == 2.0
    assert pressure.usable_cpus(None, None, None) is None


def test_busy_threshold_follows_the_fair_share() -> None:
    # 2 usable cores at load 26: half of a fair share 100 x 2 / 26 = 7.69% -> 3.85%
    assert busy_threshold(2.0, [26.0, 20.0, 10.0], 5) == pytest.approx(50.0 * 2 / 26)
    # a quiet host: at most half a core
    assert busy_threshold(2.0, [0.1, 0.1, 0.1], 1) == 50.0


def test_niced_competitors_are_counted() -> None:
    # 26 competitors at 7% of a core each (20 of them at nice 19) and a daemon at 1%: with the
    # 3.85% threshold all 26 are busy, 20 niced; a fixed 50% threshold counted 0
    percents = [(7.0, 19)] * 20 + [(7.0, 0)] * 6 + [(1.0, 0)]
    assert count_busy(percents, 50.0 * 2 / 26) == (26, 20)
    assert count_busy(percents, 50.0) == (0, 0)


def test_loaded_by_psi_even_when_no_process_is_seen() -> None:
    assert is_loaded(0, [0.5, 0.5, 0.5], 2.0, psi_some_share=0.8)
    assert not is_loaded(0, [0.5, 0.5, 0.5], 2.0, psi_some_share=0.1)


def test_a_real_monitor_records_the_kernel_fields() -> None:
    # no figure is asserted (the host is shared); only that each field is read or None
    state = HostMonitor().finish()
    found = state.pressure
    assert found is not None
    assert found.usable_cpus is None or found.usable_cpus >= 1
    assert found.psi_some_share is None or 0.0 <= found.psi_some_share <= 1.0
    assert found.other_cpu_cores is None or found.other_cpu_cores >= 0.0
    assert "usable CPU" in pressure_text(state)


def test_old_host_sections_still_load_and_new_ones_round_trip() -> None:
    old = {"logical_cpus": 2, "load_average_end": [1.0, 1.0, 1.0], "busy_processes": 0}
    assert HostState.model_validate(old).pressure is None
    new = HostState(logical_cpus=2, pressure=HostPressure(psi_some_share=0.5, steal_share=0.0))
    again = HostState.model_validate_json(new.model_dump_json())
    assert again.pressure == new.pressure


def test_the_page_shows_the_host_pressure(sim_clock: SimulatedClock) -> None:
    report = measure_latency(
        sim_clock.workload(1e-3),
        options={"clock": sim_clock, "max_run_time": 0.1},
    )
    host = HostState(
        logical_cpus=2,
        load_average_start=[26.0, 25.0, 20.0],
        load_average_end=[27.0, 25.0, 20.0],
        busy_processes=24,
        pressure=HostPressure(usable_cpus=2.0, psi_some_share=0.97, niced_busy_processes=20),
    )
    report.provenance = report.provenance.model_copy(update={"host": host})
    page = render_report(report)
    assert "CPU pressure (PSI some, share of the timing)" in page and "97 %" in page
    assert "24 (20 niced) on 2.0 CPUs" in page
