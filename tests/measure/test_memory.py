"""Tracked-tensor and allocator peaks; scopes stay separate."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import _get_current_dispatch_mode

from torchscan_stages.measure.memory import TrackedTensorMemory, measure_peak_memory
from torchscan_stages.report import BenchmarkReport, MetricResult

MIB = 2**20


def _result(report: BenchmarkReport, scope: str) -> MetricResult:
    assert report.memory is not None
    (result,) = [r for r in report.memory.results if r.scope == scope]
    return result


def test_100_mib_float_tensor_is_tracked() -> None:
    def workload() -> None:
        x = torch.ones(100 * MIB // 4)  # 26,214,400 float32 elements x 4 bytes = 100 MiB
        x.mul_(2)  # in place: same storage, counted once

    report = measure_peak_memory(workload)
    peak = _result(report, "cpu_tracked_tensors")
    assert peak.status == "complete" and peak.method == "operator_dispatch"
    assert peak.value == 100 * MIB  # 104,857,600 bytes
    assert report.execution.calls == {"memory": 1}
    assert report.diagnostics == []


def test_freed_tensors_do_not_accumulate_and_views_count_once() -> None:
    def workload() -> None:
        for _ in range(3):
            a = torch.zeros(10 * MIB // 4)  # 10 MiB, freed before the next iteration
            v = a.view(2, -1)[0]  # a view shares a's storage: no new bytes
            del a, v
        b = torch.zeros(MIB // 4)  # 1 MiB
        c = b + 1  # 1 MiB more while b is alive
        del b, c

    report = measure_peak_memory(workload)
    # peak = one 10 MiB tensor at a time, never 3 x 10 MiB; b + c = 2 MiB later is smaller
    assert _result(report, "cpu_tracked_tensors").value == 10 * MIB


def test_preexisting_storages_are_a_separate_baseline() -> None:
    weight = torch.zeros(4 * MIB // 4)  # 4 MiB allocated before the call

    def workload() -> torch.Tensor:
        return weight * 2  # reads 4 MiB, allocates 4 MiB

    report = measure_peak_memory(workload)
    assert _result(report, "cpu_tracked_tensors").value == 4 * MIB
    assert report.memory is not None
    assert report.memory.baseline_bytes["cpu_tracked_tensors_preexisting"] == 4 * MIB


def test_mode_is_removed_when_the_workload_raises() -> None:
    def workload() -> None:
        torch.zeros(8)
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        measure_peak_memory(workload)
    assert _get_current_dispatch_mode() is None


def test_tracker_counts_backward_of_a_training_step() -> None:
    model = torch.nn.Linear(256, 256)
    x = torch.randn(64, 256)

    tracker = TrackedTensorMemory()
    with tracker:
        model(x).sum().backward()
    # at least the weight gradient: 256 x 256 float32 = 262,144 bytes
    assert tracker.peak["cpu"] >= 256 * 256 * 4
    assert model.weight.grad is not None


def test_bad_arguments() -> None:
    with pytest.raises(TypeError, match="workload"):
        measure_peak_memory("not callable")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not supported"):
        measure_peak_memory(lambda: None, device="meta")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
@pytest.mark.cuda
def test_cuda_allocator_peaks_are_two_scopes() -> None:
    def workload() -> None:
        x = torch.empty(64 * MIB, dtype=torch.uint8, device="cuda")  # 64 MiB
        del x

    report = measure_peak_memory(workload, device="cuda")
    allocated = _result(report, "accelerator_allocated")
    reserved = _result(report, "accelerator_reserved")
    assert allocated.method == reserved.method == "allocator_stats"
    assert allocated.value is not None and reserved.value is not None
    assert report.memory is not None
    base = report.memory.baseline_bytes["accelerator_allocated"]
    # the peak includes what was allocated before the call plus the 64 MiB tensor
    assert allocated.value >= base + 64 * MIB
    assert reserved.value >= allocated.value
    assert _result(report, "cpu_tracked_tensors").value == 0  # no CPU tensor was created


def test_observes_the_grad_mode_the_workload_runs_under() -> None:
    layer = torch.nn.Linear(4, 4)
    x = torch.randn(2, 4)

    def inference() -> torch.Tensor:
        with torch.no_grad():
            return layer(x)

    # the caller has grad on, the workload turns it off: the record says both
    assert torch.is_grad_enabled()
    report = measure_peak_memory(inference)
    assert report.execution.grad_enabled is True
    assert report.execution.workload_grad_enabled is False
    assert measure_peak_memory(lambda: layer(x)).execution.workload_grad_enabled is True


def test_generator_workload_is_not_a_complete_zero() -> None:
    def workload():  # type: ignore[no-untyped-def]  # a generator function: runs nothing
        yield torch.ones(1024) * 2

    report = measure_peak_memory(workload)
    result = _result(report, "cpu_tracked_tensors")
    assert result.status == "unavailable"  # nothing ran: not a complete 0 bytes
    (diagnostic,) = report.diagnostics
    assert diagnostic.code == "lazy_output" and "generator" in diagnostic.message


def test_lazy_iterator_after_real_work_is_a_lower_bound() -> None:
    def workload() -> object:
        kept = torch.ones(1024)  # 1024 x 4 bytes = 4096 bytes allocated before deferring
        return map(lambda x: x * 2, [kept])  # the lazy iterator is the point

    report = measure_peak_memory(workload)
    result = _result(report, "cpu_tracked_tensors")
    assert result.status == "partial" and result.known_value == 4096  # 1024 x 4 bytes
    assert [d.code for d in report.diagnostics] == ["lazy_output"]


def test_empty_batch_is_flagged_as_empty_work() -> None:
    model = torch.nn.Linear(4, 3)
    batch = torch.randn(0, 4)  # batch_size 0

    report = measure_peak_memory(lambda: model(batch))
    result = _result(report, "cpu_tracked_tensors")
    assert result.value == 0  # 0 rows x 3 outputs x 4 bytes = 0 bytes: true, but no work
    (diagnostic,) = report.diagnostics
    assert diagnostic.code == "empty_work" and diagnostic.severity == "error"
    assert "a batch of 0" in diagnostic.message


def test_real_batch_and_in_place_work_are_not_flagged() -> None:
    model = torch.nn.Linear(4, 3)
    report = measure_peak_memory(lambda: model(torch.randn(2, 4)))
    assert report.diagnostics == []
    x = torch.zeros(8)
    report = measure_peak_memory(lambda: x.add_(1))  # in place: no new bytes, but work
    assert report.diagnostics == [] and _result(report, "cpu_tracked_tensors").value == 0
