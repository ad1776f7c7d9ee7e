"""The instrumented profiler pass: operators, counts, shapes, trace; never latency."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from torchscan_stages.measure.profile import profile_workload


def test_profile_lists_operators_with_calls_and_shapes(tmp_path: Path) -> None:
    a = torch.randn(64, 32)
    b = torch.randn(32, 16)
    calls = []

    def workload() -> torch.Tensor:
        calls.append(1)
        return torch.relu(a @ b) + 1

    trace = tmp_path / "trace.json"
    report = profile_workload(workload, trace_path=trace, row_limit=50)
    prof = report.profile
    assert prof is not None and prof.instrumented is True
    assert "not clean latency" in prof.note
    by_name = {op.name: op for op in prof.operators}
    assert by_name["aten::mm"].calls == 1  # one matmul per call, one profiled call
    assert "[[64, 32], [32, 16]]" in by_name["aten::mm"].input_shapes
    assert by_name["aten::relu"].calls == 1
    # sorted by self CPU time, largest first
    selfs = [op.self_cpu_time_s for op in prof.operators]
    assert selfs == sorted(selfs, reverse=True)
    # 1 warm-up call outside the profiler + 1 profiled call
    assert report.execution.calls == {"profile": 2} and len(calls) == 2
    assert prof.trace_path == str(trace)
    assert "traceEvents" in json.loads(trace.read_text())
    assert prof.activities == ["CPU"] and by_name["aten::mm"].self_device_time_s is None


def test_row_limit_and_count_sort() -> None:
    x = torch.ones(8)

    def workload() -> None:
        for _ in range(3):
            torch.mul(x, x)

    report = profile_workload(workload, row_limit=1, sort_by="count", warmup_calls=0)
    assert report.profile is not None and len(report.profile.operators) == 1
    assert report.profile.operators[0].name == "aten::mul"
    assert report.profile.operators[0].calls == 3  # three multiplications in the one profiled call
    assert report.execution.calls == {"profile": 1}


def test_bad_options_refused_before_any_call() -> None:
    calls = []
    with pytest.raises(ValueError, match="sort_by"):
        profile_workload(lambda: calls.append(1), sort_by="self_cuda_time")
    with pytest.raises(ValueError, match="row_limit"):
        profile_workload(lambda: calls.append(1), row_limit=0)
    assert calls == []


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
@pytest.mark.cuda
def test_cuda_profile_has_device_times() -> None:
    a = torch.randn(1024, 1024, device="cuda")
    report = profile_workload(lambda: a @ a, device="cuda", sort_by="self_device_time_total")
    prof = report.profile
    assert prof is not None and "CUDA" in prof.activities
    assert any((op.self_device_time_s or 0) > 0 for op in prof.operators)


def _matmul() -> torch.Tensor:
    return torch.ones(4, 4) @ torch.ones(4, 4)


def test_trace_path_that_is_a_directory_is_refused_before_measuring(tmp_path: Path) -> None:
    calls: list[int] = []

    def workload() -> torch.Tensor:
        calls.append(1)
        return _matmul()

    folder = tmp_path / "traces"
    folder.mkdir()
    with pytest.raises(ValueError, match=r"trace_path=.*traces' is a directory"):
        profile_workload(workload, trace_path=folder)
    assert calls == []  # refused before the workload ran
    assert folder.is_dir() and list(folder.iterdir()) == []  # not replaced by a file
    assert sorted(p.name for p in tmp_path.iterdir()) == ["traces"]  # no stray traces.tmp


def test_trace_path_under_a_file_is_refused_before_measuring(tmp_path: Path) -> None:
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("x")
    with pytest.raises(ValueError, match="is not a directory"):
        profile_workload(_matmul, trace_path=blocker / "sub" / "trace.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["not_a_dir"]


def test_trace_path_in_an_unwritable_directory(tmp_path: Path) -> None:
    # root writes into any folder of its own, but nobody creates files in /proc: either the
    # path is refused before measuring, or the report says the trace was not written
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    target = Path("/proc/trace.json") if os.geteuid() == 0 else locked / "trace.json"
    try:
        report = profile_workload(_matmul, trace_path=target)
    except ValueError as error:
        assert "is not writable" in str(error)
    else:
        assert report.profile is not None and report.profile.trace_path is None
        assert [d.code for d in report.diagnostics] == ["trace_not_written"]
    finally:
        locked.chmod(0o700)
    assert not target.exists() and list(locked.iterdir()) == []


def test_trace_is_written_atomically_without_stray_files(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "trace.json"
    report = profile_workload(_matmul, trace_path=target)
    assert report.profile is not None and report.profile.trace_path == str(target)
    assert [p.name for p in target.parent.iterdir()] == ["trace.json"]


def test_generator_workload_gets_lazy_output(tmp_path: Path) -> None:
    def workload():  # type: ignore[no-untyped-def]  # a generator function: runs nothing
        yield _matmul()

    report = profile_workload(workload)
    assert report.profile is not None
    assert [d.code for d in report.diagnostics] == ["lazy_output"]
    assert "generator" in report.diagnostics[0].message
