"""Host state in provenance and the loaded-host / load-change diagnostics (synthetic states)."""

from __future__ import annotations

from pathlib import Path

import psutil
from simulated_clock import SimulatedClock

from torchscan_stages.measure.host import (
    BlockTrace,
    HostMonitor,
    classify_blocks,
    host_diagnostics,
    is_loaded,
)
from torchscan_stages.provenance import build_provenance
from torchscan_stages.report import HostState, LatencyNoise, Provenance


def test_host_state_travels_in_provenance() -> None:
    host = HostState(
        logical_cpus=2,
        load_average_start=[0.5, 0.4, 0.3],
        load_average_end=[2.5, 1.0, 0.5],
        cpu_governor="performance",
        busy_processes=2,
        loaded=True,
    )
    provenance = build_provenance(host=host)
    assert provenance.host == host
    assert Provenance.model_validate_json(provenance.model_dump_json()) == provenance
    assert build_provenance().host is None  # only timings record it


def test_monitor_records_this_host_without_judging_speed() -> None:
    state = HostMonitor().finish()
    assert state.logical_cpus == psutil.cpu_count(logical=True)
    assert state.busy_processes is not None and state.busy_processes >= 0
    assert state.load_average_end is None or len(state.load_average_end) == 3


def test_is_loaded_counts_this_process() -> None:
    # 2 CPUs: this process + 1 other busy process = 2, not more than the cores
    assert not is_loaded(1, [1.0, 1.0, 1.0], 2)
    assert is_loaded(2, [1.0, 1.0, 1.0], 2)  # 2 others + this one = 3 > 2 cores
    assert is_loaded(0, [2.5, 1.0, 1.0], 2)  # 1-minute load 2.5 > 2 cores
    assert not is_loaded(5, None, None)  # nothing known about the cores: no claim


def test_loaded_and_changing_host_diagnostics() -> None:
    host = HostState(
        logical_cpus=2,
        load_average_start=[0.2, 0.2, 0.2],
        load_average_end=[3.4, 1.0, 0.5],
        busy_processes=2,
        loaded=True,
    )
    codes = [d.code for d in host_diagnostics(host, None, "latency.warmed")]
    # loaded (2 others + us > 2 cores); load moved 0.2 -> 3.4, by more than 1
    assert codes == ["loaded_host", "load_changed"]
    quiet = HostState(logical_cpus=2, load_average_start=[0.2] * 3, load_average_end=[0.3] * 3)
    assert host_diagnostics(quiet, LatencyNoise(load_changed=False), "latency.warmed") == []


def test_cpu_fraction_drift_is_a_load_change() -> None:
    # 9 blocks of 1 ms: the first three ran on the CPU throughout (fraction 1.0), the last
    # three got half of it (0.5 ms CPU per 1 ms wall): drift 0.5 > 0.1
    trace = BlockTrace()
    cpu = [1e-3] * 6 + [0.5e-3] * 3
    for index, used in enumerate(cpu):
        trace.add((0.0, index), (used, index), 1e-3)
    noise = classify_blocks([1e-3] * 9, trace)
    assert noise.load_changed is True
    # CPU 6 x 1 ms + 3 x 0.5 ms = 7.5 ms over 9 ms of wall time
    assert noise.cpu_fraction is not None and abs(noise.cpu_fraction - 7.5 / 9) < 1e-12
    assert noise.involuntary_switches == 0 and noise.outliers == []


def test_far_out_blocks_are_slow_or_fast_outliers() -> None:
    # 10 blocks of 1.0, 10 of 1.02, one 2.0, one 0.5: sorted n = 22, q1 at h = 21 x 0.25 =
    # 5.25 -> 1.0, q3 at h = 15.75 -> 1.02
    blocks = [1.0 if i % 2 else 1.02 for i in range(20)] + [2.0, 0.5]
    noise = classify_blocks(blocks, None)
    # IQR 0.02: fences 1.02 + 3 x 0.02 = 1.08 and 1.0 - 0.06 = 0.94
    assert [(o.index, o.kind) for o in noise.outliers] == [(20, "slow"), (21, "fast")]
    assert noise.involuntary_switches is None  # not probed


def test_overlapping_timings_on_one_host_are_found() -> None:
    from torchscan_stages.measure.host import host_id, overlapping_timings

    def state(start: str, end: str, where: str = "abc") -> HostState:
        return HostState(
            host_id=where,
            started_at=f"2026-01-01T00:00:{start}+00:00",
            finished_at=f"2026-01-01T00:00:{end}+00:00",
        )

    timings = [
        ("a", state("00", "10")),
        ("b", state("05", "15")),  # overlaps a (05 < 10)
        ("c", state("20", "30")),  # after both
        ("d", state("05", "15", where="other")),  # same time, another host
        ("e", None),  # injected clock: no host state
    ]
    assert overlapping_timings(timings) == [("a", "b")]
    assert len(host_id()) == 12 and HostMonitor().finish().host_id == host_id()


def test_sweep_summary_warns_when_timing_jobs_overlapped(tmp_path: Path) -> None:
    from torchscan_stages.measure.latency import measure_latency
    from torchscan_stages.pipeline.sweep import summarize_jobs

    def job(name: str, start: str, end: str) -> None:
        # a real latency report (simulated clock), stamped as if timed on host "abc"
        clock = SimulatedClock()
        report = measure_latency(
            clock.workload(1e-3),
            options={"warmup": 0.0, "clock": clock},
        )
        host = HostState(
            host_id="abc",
            started_at=f"2026-01-01T00:00:{start}+00:00",
            finished_at=f"2026-01-01T00:00:{end}+00:00",
        )
        report = report.model_copy(
            update={"provenance": report.provenance.model_copy(update={"host": host})}
        )
        report.save(tmp_path / name / "reports" / "latency.json")

    job("0", "00", "10")
    job("1", "05", "15")  # overlaps job 0 on the same host
    job("2", "20", "30")
    summary = summarize_jobs([tmp_path / n for n in "012"], tmp_path)
    assert summary.overlapping_timings == [("0/reports/latency.json", "1/reports/latency.json")]
    assert summary.warning is not None
    assert "1 pair(s) of timing jobs overlapped" in summary.warning


def test_more_preempted_blocks_late_is_a_load_change() -> None:
    # 9 blocks, CPU/wall 1.0 throughout, but only the last three had involuntary switches:
    # share of preempted blocks 0/3 -> 3/3, a drift of 1.0 > 0.3
    trace = BlockTrace()
    for index in range(9):
        trace.add((0.0, 0), (1e-3, 1 if index >= 6 else 0), 1e-3)
    noise = classify_blocks([1e-3] * 9, trace)
    assert noise.load_changed is True and noise.involuntary_switches == 3
    assert noise.outliers == []  # CPU/wall stayed at the typical 1.0: not descheduled
