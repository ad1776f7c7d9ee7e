"""measure_workload: separate passes, recorded calls, a readable summary, JSON evidence."""

from __future__ import annotations

import io
import sys
from collections.abc import Callable

import pytest
import torch
from simulated_clock import SimulatedClock

from torchscan_stages.face import measure_workload
from torchscan_stages.render.text import benchmark_summary
from torchscan_stages.report import BenchmarkReport, load_report

FAST = {"warmup": 0.0, "min_run_time": 0.02, "max_run_time": 0.1}


def _matmul_workload() -> tuple[list[int], Callable[[], torch.Tensor]]:
    a = torch.randn(16, 8)
    b = torch.randn(8, 4)
    calls: list[int] = []

    def workload() -> torch.Tensor:
        calls.append(1)  # a side effect that every pass must preserve
        return a @ b

    return calls, workload


def test_selected_passes_and_calls_are_recorded() -> None:
    calls, workload = _matmul_workload()
    out, progress = io.StringIO(), io.StringIO()
    report = measure_workload(
        workload,
        flops=False,
        profile=True,
        work_units=16,
        unit="samples",
        name="mm",
        file=out,
        progress=progress,
        options=FAST,
        precision="float32",
        training=False,
    )
    assert report.latency is not None and report.memory is not None
    assert report.profile is not None and report.flops is None and report.rss is None
    ex = report.execution
    assert set(ex.calls) == {"latency", "memory", "profile"}
    assert sum(ex.calls.values()) == len(calls)  # every call counted, side effects kept
    assert ex.calls["memory"] == 1 and ex.calls["profile"] == 2
    assert (ex.precision, ex.training) == ("float32", False)
    # a 16x4 float32 output = 256 bytes tracked during the memory pass
    (cpu,) = report.memory.results
    assert cpu.scope == "cpu_tracked_tensors" and cpu.value == 16 * 4 * 4
    assert report.latency.throughput.unit == "samples/s"
    summary = out.getvalue()
    assert "[ok]" in summary and "first-call latency" in summary and "never summed" in summary
    assert "[instrumented]" in summary
    assert "(3/3) profile" in progress.getvalue()
    assert load_report(report.model_dump_json()) == report


def test_silent_progress_and_default_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    _, workload = _matmul_workload()
    measure_workload(workload, flops=False, memory=False, options=FAST, progress=False)
    captured = capsys.readouterr()
    assert "warmed latency (median)" in captured.out
    assert "[measure_workload]" not in captured.err


def test_flops_pass_uses_operator_dispatch() -> None:
    calls, workload = _matmul_workload()
    report = measure_workload(
        workload, latency=False, memory=False, file=io.StringIO(), progress=False
    )
    assert report.flops is not None and report.execution.calls["flops"] == len(calls) == 1
    # 16x8 @ 8x4: 2 * 16 * 8 * 4 = 1024 FLOPs (multiply + add)
    assert report.flops.total.value == 1024


def test_rss_pass_runs_the_command() -> None:
    _, workload = _matmul_workload()
    report = measure_workload(
        workload,
        flops=False,
        memory=False,
        latency=False,
        rss_command=[sys.executable, "-c", "pass"],
        file=io.StringIO(),
        progress=False,
    )
    assert report.rss is not None and report.rss.peak.scope == "process_rss"
    assert report.execution.calls == {}  # the child rebuilds its own workload


def test_partial_and_unavailable_markers_are_visible() -> None:
    _, workload = _matmul_workload()
    report = measure_workload(
        workload,
        flops=False,
        memory=False,
        latency=False,
        rss_command=[sys.executable, "-c", "import sys; sys.exit(3)"],
        file=io.StringIO(),
        progress=False,
    )
    text = benchmark_summary(report)
    assert "[>= partial]" in text and "child_exit_nonzero" in text
    empty = BenchmarkReport.model_validate_json(report.model_dump_json())
    assert empty.rss is not None and empty.rss.peak.status == "partial"


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"flops": "yes"}, TypeError, "flops must be True or False"),
        ({"work_units": -1}, ValueError, "work_units"),
        ({"options": {"warm": 1}}, ValueError, "unknown key"),
        ({"rss_command": "python -c pass"}, TypeError, "list of strings"),
        ({"device": "cuda:99"}, ValueError, "cuda"),
        ({"progress": 3}, TypeError, "progress"),
    ],
)
def test_bad_arguments_refused_before_any_call(
    kwargs: dict[str, object], error: type[Exception], match: str
) -> None:
    calls, workload = _matmul_workload()
    with pytest.raises(error, match=match):
        measure_workload(workload, file=io.StringIO(), **kwargs)  # type: ignore[arg-type]
    assert calls == []


def test_flops_diagnostics_join_the_report_diagnostics() -> None:
    matrix = torch.randn(4, 4)

    def workload() -> torch.Tensor:
        return torch.linalg.qr(matrix).Q  # QR has no FLOP formula: uncounted

    report = measure_workload(workload, latency=False, memory=False, progress=False)
    assert report.flops is not None and report.flops.total.status == "partial"
    codes = [d.code for d in report.diagnostics]
    assert "uncounted_operator" in codes  # at the top, where status is read first


def test_flops_pass_alone_observes_the_workloads_grad_mode() -> None:
    layer = torch.nn.Linear(4, 2)
    x = torch.randn(3, 4)

    def inference() -> torch.Tensor:
        with torch.no_grad():  # the workload owns its grad mode
            return layer(x)

    quiet = {"file": io.StringIO(), "progress": io.StringIO()}
    with torch.enable_grad():
        report = measure_workload(inference, memory=False, latency=False, **quiet)
        trained = measure_workload(lambda: layer(x), memory=False, latency=False, **quiet)
    assert report.execution.grad_enabled is True  # the caller's mode
    assert report.execution.workload_grad_enabled is False  # what the operators ran under
    assert trained.execution.workload_grad_enabled is True
    # addmm 2*3*4*2 = 48 FLOPs, all tensor products
    assert report.flops is not None and report.flops.total.value == 48
    assert report.flops.product_flops is not None and report.flops.product_flops.value == 48


def test_latency_options_object_and_printout_in_human_units(sim_clock: SimulatedClock) -> None:
    from torchscan_stages.measure.latency_options import LatencyOptions

    out = io.StringIO()
    report = measure_workload(
        sim_clock.workload(2e-3),
        flops=False,
        memory=False,
        progress=False,
        file=out,
        options=LatencyOptions(warmup=0.0, min_run_time=0.05, clock=sim_clock),
    )
    assert report.latency is not None and report.latency.warmed.value == pytest.approx(2e-3)
    assert report.latency.settings["warmup_s"] == 0.0  # the object's values were used
    text = out.getvalue()
    # 2 ms per call; throughput 1 sample / 2 ms = 500 samples/s
    assert "2.00 ms" in text and "500 samples/s" in text
    assert "0.002 s" not in text


def test_run_passes_never_prints_and_needs_the_counter_for_flops(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Below the face the passes return the report only; the FLOP pass needs its counter."""
    from torchscan_stages.measure.workload import PassPlan, run_passes

    calls, workload = _matmul_workload()
    with pytest.raises(ValueError, match="needs count_flops"):
        run_passes(workload, PassPlan(memory=False, latency=False), progress=False)
    assert calls == []  # refused before any call
    report = run_passes(workload, PassPlan(flops=False, latency=False), progress=False)
    assert report.memory is not None and capsys.readouterr().out == ""
