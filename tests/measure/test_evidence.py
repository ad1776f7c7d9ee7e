"""Evidence rules: a frozen clock, an empty batch, a workload running no operators never give
a complete number (docs/bad-input.md, "Workloads")."""

from __future__ import annotations

import torch
from simulated_clock import SimulatedClock
from torch import nn

from torchscan_stages import measure_latency, measure_peak_memory
from torchscan_stages.report import BenchmarkReport


def _codes(report: BenchmarkReport) -> list[str]:
    return [d.code for d in report.diagnostics]


def test_a_clock_that_never_advances_gives_no_complete_time() -> None:
    # clock=lambda: 0.0 once gave a complete 0.0 s first call and warmed median
    report = measure_latency(
        lambda: None,
        options={"clock": lambda: 0.0, "warmup": 0.01, "min_run_time": 0.01, "max_run_time": 0.05},
    )
    lat = report.latency
    assert lat is not None
    assert lat.first_call.status == "unavailable" and lat.first_call.value is None
    assert lat.warmed.status == "unavailable" and lat.throughput.status == "unavailable"
    (stuck,) = [d for d in report.diagnostics if d.code == "clock_not_advancing"]
    assert stuck.severity == "error" and "read the same time for the whole run" in stuck.message


def test_a_clock_that_advances_keeps_its_times(sim_clock: SimulatedClock) -> None:
    report = measure_latency(
        sim_clock.workload(2**-9),
        options={"warmup": 2**-9, "min_run_time": 2**-6, "max_run_time": 2**-4, "clock": sim_clock},
    )
    assert report.latency is not None and report.latency.warmed.value == 2**-9
    assert "clock_not_advancing" not in _codes(report)


def _batch_norm_model() -> nn.Module:
    # batch norm (eval, as the stages run it) allocates per-channel buffers (aten.empty of 4
    # elements) even for an empty batch: those once hid the batch of 0 from the empty check
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU()).eval()


def test_empty_batch_through_batch_norm_is_empty_work_for_latency(
    sim_clock: SimulatedClock,
) -> None:
    model, x = _batch_norm_model(), torch.randn(0, 3, 8, 8)
    tick = sim_clock.workload(2**-9)

    def empty() -> torch.Tensor:
        tick()
        return model(x)

    report = measure_latency(
        empty,
        work_units=8,
        options={"warmup": 2**-9, "min_run_time": 2**-6, "max_run_time": 2**-4, "clock": sim_clock},
    )
    assert report.latency is not None
    assert report.latency.throughput.status == "unavailable"  # not 8 / 2**-9 = 4096 samples/s
    assert "empty_work" in _codes(report)


def test_empty_batch_through_batch_norm_is_empty_work_for_memory() -> None:
    model, x = _batch_norm_model(), torch.randn(0, 3, 8, 8)
    report = measure_peak_memory(lambda: model(x))
    assert "empty_work" in _codes(report)
    full = measure_peak_memory(lambda: model(torch.randn(1, 3, 8, 8)))
    assert "empty_work" not in _codes(full)


def test_a_factory_only_workload_is_work() -> None:
    # only factory operators ran (torch.ones(1000)): those 1000 elements are the work done
    report = measure_peak_memory(lambda: torch.ones(1000))
    assert "empty_work" not in _codes(report) and "no_operators" not in _codes(report)


def test_a_workload_running_no_operator_has_no_complete_memory_peak() -> None:
    report = measure_peak_memory(lambda: None)  # once a complete 0 bytes
    assert report.memory is not None
    (cpu,) = report.memory.results
    assert cpu.status == "unavailable"
    (unseen,) = [d for d in report.diagnostics if d.code == "no_operators"]
    assert unseen.severity == "error" and "dispatched no torch operator" in unseen.message


def test_a_workload_running_no_operator_has_no_complete_throughput() -> None:
    # the real clock: the durations are real, but work_units per second has no evidence
    report = measure_latency(
        lambda: None,
        options={"warmup": 0.01, "min_run_time": 0.01, "max_run_time": 0.05},
    )
    assert report.latency is not None
    assert report.latency.throughput.status == "unavailable"
    assert "no_operators" in _codes(report)


def test_a_simulated_workload_needs_no_operator(sim_clock: SimulatedClock) -> None:
    # an injected clock is a simulation: the clock, not the dispatcher, is its evidence
    report = measure_latency(
        sim_clock.workload(2**-9),
        work_units=4,
        options={"warmup": 2**-9, "min_run_time": 2**-6, "max_run_time": 2**-4, "clock": sim_clock},
    )
    assert report.latency is not None
    assert report.latency.throughput.value == 4 / 2**-9  # 4 units per 2**-9 s = 2048 /s
