"""The ``compile`` candidate records its compile time as its first call.

``comparison.compile`` carries the candidate's timed first call (compile + one run) as its own
MetricResult (scope ``compile_first_call``), apart from warmed latency, with Dynamo's
compiled-frame counts over that call and over every later one. Times come from an injected
clock; the compile counts are real torch.compile (backend ``eager``: fast, same counters).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from dynamo_counters import dynamo_counters_as_found
from simulated_clock import SimulatedClock

from torchscan_stages.compare.benchmarks import compare_benchmarks
from torchscan_stages.pipeline.candidate import CompileWatch, compile_record
from torchscan_stages.pipeline.schema import CompileConfig
from torchscan_stages.render.bench_view import comparison_view
from torchscan_stages.report import BenchmarkComparison, load_report
from torchscan_stages.stages.compare import compile_text

ROOT = Path(__file__).resolve().parents[2]
COMPILE_S, CALL_S = 2.5, 1e-3
_MADE = itertools.count()


@pytest.fixture(autouse=True)
def _dynamo_counters_as_found() -> Iterator[None]:
    """Dynamo's process-wide counters put back after each test (see dynamo_counters.py)."""
    with dynamo_counters_as_found():
        yield


def _passed(base: Any, cand: Any) -> bool:
    return True


def _fresh_function() -> Any:
    """``x * 2 + 1`` with a code object of its own: Dynamo caches compiled frames per code
    object, so a function defined once would arrive compiled in the next test."""
    namespace: dict[str, Any] = {}
    source = "def double_plus_one(x):\n    return x * 2 + 1\n"
    exec(compile(source, f"<candidate {next(_MADE)}>", "exec"), namespace)
    return namespace["double_plus_one"]


def _compiled_candidate(clock: SimulatedClock, shapes: list[int]) -> Any:
    """A fresh compiled function; its first call costs COMPILE_S more on the clock. The
    ``shapes[i]``-long input of call i (the last one from then on)."""

    compiled = torch.compile(_fresh_function(), backend="eager", dynamic=False)
    calls = [0]

    def candidate() -> Any:
        if calls[0] == 0:
            clock.now += COMPILE_S
        clock.now += CALL_S
        size = shapes[min(calls[0], len(shapes) - 1)]
        calls[0] += 1
        compiled(torch.ones(size))
        return CALL_S

    return candidate


def _compare(clock: SimulatedClock, watch: CompileWatch) -> BenchmarkComparison:
    return compare_benchmarks(
        clock.workload(CALL_S), watch, check=_passed, options={"clock": clock}
    )


def test_the_first_call_is_the_compile_record_apart_from_warmed_latency(
    sim_clock: SimulatedClock, tmp_path: Path
) -> None:
    watch = CompileWatch(_compiled_candidate(sim_clock, [4]))
    comparison = _compare(sim_clock, watch)
    record = compile_record(comparison, CompileConfig(backend="eager"), watch)
    assert record is not None
    # the first call: 2.5 s of compile + 1 ms of run, on the injected clock
    assert record.first_call.is_complete and record.first_call.scope == "compile_first_call"
    assert record.first_call.value == pytest.approx(COMPILE_S + CALL_S, abs=1e-9)
    assert (record.frames_compiled_first_call, record.frames_compiled_after) == (1, 0)
    assert watch.calls > 2  # the timed rounds called it again, compiling nothing
    warmed = comparison.candidate.latency.warmed  # type: ignore[union-attr]
    assert warmed.value == pytest.approx(CALL_S, rel=1e-6)  # 1 ms: no compile in it
    codes = {d.code for d in comparison.diagnostics}
    assert not codes & {"compile_not_in_first_call", "recompiled_after_first_call"}
    comparison.compile = record
    assert compile_text(record) == "compile (first call) 2.5 s, eager: 1 frame(s) compiled, 0 after"
    rows = dict(comparison_view(comparison).settings)
    assert rows["compile first call"] == "2.5 s · eager · 1 frame(s) compiled, 0 after"
    loaded = load_report(comparison.save(tmp_path / "compare.json"))
    assert isinstance(loaded, BenchmarkComparison) and loaded.compile == record


def test_a_recompile_after_the_first_call_is_a_warning_on_warmed_latency(
    sim_clock: SimulatedClock,
) -> None:
    watch = CompileWatch(_compiled_candidate(sim_clock, [4, 5]))  # a new shape on call 2
    comparison = _compare(sim_clock, watch)
    record = compile_record(comparison, CompileConfig(backend="eager"), watch)
    assert record is not None
    assert (record.frames_compiled_first_call, record.frames_compiled_after) == (1, 1)
    warning = next(d for d in comparison.diagnostics if d.code == "recompiled_after_first_call")
    assert warning.metric == "latency.warmed" and warning.count == 1


def test_a_first_call_that_compiles_nothing_is_not_called_a_compile(
    sim_clock: SimulatedClock,
) -> None:
    candidate = _compiled_candidate(sim_clock, [4])
    candidate()  # compiled before the comparison: its first call there compiles nothing
    watch = CompileWatch(candidate)
    comparison = _compare(sim_clock, watch)
    record = compile_record(comparison, CompileConfig(backend="eager"), watch)
    assert record is not None and record.frames_compiled_first_call == 0
    note = next(d for d in comparison.diagnostics if d.code == "compile_not_in_first_call")
    assert note.severity == "warning"


@pytest.mark.slow
def test_the_configured_compile_candidate_carries_its_compile_record() -> None:
    from torchscan_stages.pipeline.candidate import compare_configured_candidate
    from torchscan_stages.pipeline.loader import load_config

    overrides = [
        "candidate=compile",
        "candidate.compile.backend=eager",  # inductor's compile takes minutes on 2 cores
        "compare.warmup=0.01",
        "compare.min_run_time=0.05",
        "compare.max_run_time=0.2",
    ]
    result = compare_configured_candidate(load_config(overrides, conf_dir=ROOT / "conf"))
    record = result.comparison.compile
    assert record is not None and record.backend == "eager"
    assert (record.frames_compiled_first_call, record.frames_compiled_after) == (1, 0)
    first = result.comparison.candidate.latency.first_call  # type: ignore[union-attr]
    assert record.first_call.value == first.value  # the compare stage's timed first call
    assert result.metrics()["compile_first_call_s"] == first.value
