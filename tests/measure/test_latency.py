"""Latency: exact statistics under an injected clock; no assertion reads the host's clock."""

from __future__ import annotations

import math
import random

import pytest
import torch
from simulated_clock import SimulatedClock

from torchscan_stages.measure.latency import calibrate_block, measure_latency, time_block
from torchscan_stages.measure.latency_options import LatencyOptions, moved_into_options
from torchscan_stages.report import BenchmarkReport


class FakeClock:
    """A clock that only moves when the workload says so (torch.utils.benchmark-style)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_injected_clock_gives_exact_statistics() -> None:
    clock = FakeClock()
    calls: list[int] = []

    def workload() -> None:
        # first call 2**-5 s (31.25 ms), every later call 2**-9 s (1.953125 ms): exact binary
        clock.now += 2**-5 if not calls else 2**-9
        calls.append(1)

    report = measure_latency(
        workload,
        work_units=32,
        unit="samples",
        options={"warmup": 2**-4, "min_run_time": 2**-4, "min_block_time": 2**-7, "clock": clock},
    )
    lat = report.latency
    assert lat is not None and lat.stats is not None
    assert lat.first_call.value == 2**-5
    assert lat.warmed.value == 2**-9 and lat.warmed.scope == "warmed_block_average"
    # warm-up runs until 2**-4 s passed: 2**-4 / 2**-9 = 32 calls
    assert lat.stats.warmup_calls == 32
    # calibration: 1 call = 2**-9 < 2**-7; next = ceil(1.1 * 2**-7 / 2**-9) = ceil(4.4) = 5
    # calls, 5 * 2**-9 >= 2**-7 -> 5 calls per block; calibration spent 1 + 5 = 6 calls
    assert lat.stats.calls_per_block == 5
    assert lat.stats.calibration_calls == 6
    # blocks of 5 * 2**-9 = 9.77 ms: min_run_time 62.5 ms is passed after 7 blocks, which
    # is also min_blocks = 7; the IQR is 0 <= the 2% target, so it stops at 7 blocks
    assert lat.stats.blocks == 7 and lat.block_times_s == [2**-9] * 7
    assert lat.stats.iqr == 0 and lat.stats.stop_reason == "target_relative_iqr"
    # throughput = 32 samples / 2**-9 s = 32 * 512 = 16384 samples/s
    assert lat.throughput.value == 16384 and lat.throughput.unit == "samples/s"
    # calls: 1 first + 32 warm-up + 6 calibration + 7 * 5 blocks = 74
    assert report.execution.calls == {"latency": 74} and len(calls) == 74
    assert report.diagnostics == []
    assert BenchmarkReport.model_validate_json(report.model_dump_json()) == report


def test_noisy_workload_gets_a_diagnostic() -> None:
    clock = FakeClock()
    rng = random.Random(0)

    def workload() -> None:
        clock.now += 0.001 * (1 + rng.random())  # uniform 1..2 ms: IQR/median ~ 33%

    report = measure_latency(
        workload,
        options={
            "warmup": 0.0,
            "min_run_time": 0.05,
            "max_run_time": 0.1,
            "min_block_time": 0.0,
            "clock": clock,
        },
    )
    assert report.latency is not None and report.latency.stats is not None
    assert report.latency.stats.stop_reason == "max_run_time"
    assert report.latency.stats.warmup_calls == 0
    assert [d.code for d in report.diagnostics] == ["latency_noisy"]


def test_primitives_with_injected_clock() -> None:
    clock = FakeClock()

    def workload() -> None:
        clock.now += 0.25

    # 4 calls of 0.25 s -> 1 s block -> 0.25 s per call
    assert time_block(workload, 4, lambda: None, clock) == 0.25
    # target 1.0 s: 1 call = 0.25 s; next = ceil(1.1 * 1.0 / 0.25) = 5 -> 1.25 s >= 1 s
    calibration = calibrate_block(workload, lambda: None, clock, min_block_time=1.0)
    assert (calibration.calls_per_block, calibration.calls_made) == (5, 6)
    with pytest.raises(ValueError, match="calls must be >= 1"):
        time_block(workload, 0, lambda: None, clock)


def test_noisy_2ms_median_within_1_percent(sim_clock: SimulatedClock) -> None:
    # every call costs 2 ms times a uniform factor in [0.95, 1.05]; each block averages
    # several calls, so the median block lies inside [1.9, 2.1] ms and, for a symmetric
    # noise, within 1% of 2 ms
    report = measure_latency(
        sim_clock.workload(0.002, noise=0.05, seed=3),
        options={"min_run_time": 0.15, "clock": sim_clock},
    )
    assert report.latency is not None and report.latency.warmed.value is not None
    assert report.latency.warmed.value == pytest.approx(0.002, rel=0.01)


def test_first_call_cost_shows_only_in_first_call(sim_clock: SimulatedClock) -> None:
    state = {"calls": 0}

    def workload() -> None:
        state["calls"] += 1
        if state["calls"] == 1:
            sim_clock.now += 0.020  # lazy initialisation on the first call only
        sim_clock.now += 0.001

    report = measure_latency(
        workload,
        options={"warmup": 0.02, "min_run_time": 0.1, "clock": sim_clock},
    )
    lat = report.latency
    assert lat is not None and lat.first_call.value is not None and lat.warmed.value is not None
    assert lat.first_call.value == pytest.approx(0.021)  # 20 ms initialisation + 1 ms call
    assert lat.warmed.value == pytest.approx(0.001)  # the 20 ms never reaches a block
    assert report.execution.calls["latency"] == state["calls"]


def test_threads_recorded_not_changed() -> None:
    before = (torch.get_num_threads(), torch.get_num_interop_threads())
    report = measure_latency(
        lambda: None,
        options={"warmup": 0.0, "min_run_time": 0.01, "max_run_time": 0.05},
    )
    assert (torch.get_num_threads(), torch.get_num_interop_threads()) == before
    assert (report.execution.num_threads, report.execution.num_interop_threads) == before
    assert report.latency is not None and report.latency.synchronized is False


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"work_units": 0}, ValueError, "work_units"),
        ({"work_units": "8"}, TypeError, "work_units"),
        ({"unit": ""}, ValueError, "unit"),
        ({"options": {"warmup": -1.0}}, ValueError, "warmup"),
        ({"options": {"min_run_time": 1.0, "max_run_time": 0.5}}, ValueError, "max_run_time"),
        ({"options": {"clock": 3}}, TypeError, "clock"),
        ({"options": {"min_blocks": 0}}, ValueError, "min_blocks"),
    ],
)
def test_bad_arguments_refused_before_any_call(
    kwargs: dict[str, object], error: type[Exception], match: str
) -> None:
    calls = []
    with pytest.raises(error, match=match):
        measure_latency(lambda: calls.append(1), **kwargs)  # type: ignore[arg-type]
    assert calls == []


def test_non_callable_workload() -> None:
    with pytest.raises(TypeError, match="workload must be a zero-argument callable"):
        measure_latency(42)  # type: ignore[arg-type]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
@pytest.mark.cuda
def test_cuda_timing_is_synchronized() -> None:
    a = torch.randn(2048, 2048, device="cuda")

    def workload() -> None:
        a @ a

    report = measure_latency(
        workload,
        device="cuda",
        options={"min_run_time": 0.1, "max_run_time": 0.5},
    )
    lat = report.latency
    assert lat is not None and lat.synchronized and lat.warmed.method == "wall_clock_synchronized"
    # 2 * 2048**3 = 17.2 GFLOP per call; a GPU cannot do it in under 10 us, so an
    # unsynchronised (launch-only) time would be far below this bound
    assert lat.warmed.value is not None and lat.warmed.value > 1e-5
    assert report.execution.device.startswith("cuda:")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
def test_cuda_work_timed_as_cpu_is_flagged() -> None:
    x = torch.randn(256, 256, device="cuda")
    report = measure_latency(
        lambda: x @ x,
        options={"min_run_time": 0.01},
    )  # device=None: the CPU
    assert "accelerator_not_synchronized" in [d.code for d in report.diagnostics]


def test_one_block_longer_than_max_run_time_is_too_few_blocks(sim_clock: SimulatedClock) -> None:
    # each call costs 0.2 s, max_run_time 0.1 s: the first block already spends the budget,
    # so 1 block < min_blocks 7; its median is kept but its spread is not judged
    report = measure_latency(
        sim_clock.workload(0.2),
        options={"warmup": 0.0, "min_run_time": 0.05, "max_run_time": 0.1, "clock": sim_clock},
    )
    lat = report.latency
    assert lat is not None and lat.stats is not None
    assert lat.stats.blocks == 1 and lat.warmed.value == pytest.approx(0.2)
    assert lat.stats.relative_iqr is None  # an IQR of 0 from one block says nothing
    codes = [d.code for d in report.diagnostics]
    assert codes == ["too_few_blocks"]
    assert "only 1 warmed block(s)" in report.diagnostics[0].message


def test_clock_that_does_not_advance_does_not_hang() -> None:
    # the injected clock never moves, so max_run_time is never reached on it; the
    # wall-clock backstop (time.monotonic, 2 x (0 + 0.05) + 1 = 1.1 s) ends the timing
    report = measure_latency(
        lambda: None,
        options={"warmup": 0.0, "min_run_time": 0.01, "max_run_time": 0.05, "clock": lambda: 0.0},
    )
    lat = report.latency
    assert lat is not None and lat.stats is not None
    assert lat.stats.stop_reason == "wall_clock_backstop"
    codes = [d.code for d in report.diagnostics]
    assert "timing_backstop" in codes and "latency_below_resolution" in codes
    assert lat.throughput.status == "unavailable"  # a 0 s median gives no throughput


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_non_finite_block_times_are_refused(bad: float) -> None:
    reads = iter([i * 1e-3 for i in range(40)])

    def clock() -> float:
        return next(reads, bad)  # 1 ms steps for 40 reads, then nan / inf

    with pytest.raises(ValueError, match="finite, non-decreasing seconds"):
        measure_latency(
            lambda: None,
            options={"warmup": 0.0, "min_run_time": 0.01, "max_run_time": 0.05, "clock": clock},
        )


def test_latency_options_validated_once_with_defaults_once() -> None:
    from torchscan_stages.measure.latency_options import (
        COMPARE_DEFAULTS,
        MEASURE_DEFAULTS,
        LatencyOptions,
    )

    # one warm-up default for both entry points (it used to be 0.02 s here and 0.1 s there)
    assert COMPARE_DEFAULTS.warmup == MEASURE_DEFAULTS.warmup
    with pytest.raises(ValueError, match="max_run_time"):
        LatencyOptions(max_run_time=math.inf)
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['warmpu'\]"):
        LatencyOptions.from_mapping({"warmpu": 0.1})
    options = LatencyOptions.from_mapping({"warmup": 0.0}, base=COMPARE_DEFAULTS)
    assert (options.warmup, options.max_run_time) == (0.0, COMPARE_DEFAULTS.max_run_time)
    with pytest.raises(AttributeError):
        options.warmup = 1.0  # type: ignore[misc]  # frozen


def test_probed_blocks_are_classified_and_kept(sim_clock: SimulatedClock) -> None:
    # a simulated host: every 5th call is preempted for 4 ms of a 1 ms call; the probe says
    # so (1 involuntary switch, CPU time stays 1 ms per call while wall time is 5 ms)
    state = {"calls": 0, "cpu": 0.0, "switches": 0}

    def workload() -> None:
        state["calls"] += 1
        state["cpu"] += 1e-3
        sim_clock.now += 1e-3
        if state["calls"] % 5 == 0:
            sim_clock.now += 4e-3
            state["switches"] += 1

    def probe() -> tuple[float, int]:
        return state["cpu"], state["switches"]

    from torchscan_stages.measure.latency import run_latency
    from torchscan_stages.measure.latency_options import LatencyOptions

    run = run_latency(
        workload,
        LatencyOptions(warmup=0.0, min_run_time=0.05, clock=sim_clock, probe=probe),
        device=torch.device("cpu"),
    )
    noise = run.section.noise
    assert noise is not None
    blocks = run.section.block_times_s
    slow = [i for i, value in enumerate(blocks) if value > 2e-3]
    # blocks of one 1 ms call: every 5th is 5 ms wall for 1 ms CPU -> CPU/wall 0.2 < 0.9
    assert slow and [o.index for o in noise.outliers if o.kind == "descheduled"] == slow
    assert len(blocks) == run.section.stats.blocks  # type: ignore[union-attr]  # all kept
    assert noise.involuntary_switches == len(slow)


def test_stable_blocks_continue_until_the_median_is_pinned_down(sim_clock: SimulatedClock) -> None:
    # one-call blocks alternate 1.000 and 1.010 ms: IQR/median ~1% <= 2% from the start,
    # and the median's 95% interval always spans both values, a half-width of
    # (1.010 - 1.000) / 2 / ~1.005 ~ 0.5%: a 1% precision target stops at min_blocks (7),
    # a 0.1% target is never met, so the blocks run to max_run_time
    from torchscan_stages.measure.latency import run_latency
    from torchscan_stages.measure.latency_options import LatencyOptions

    state = {"calls": 0}

    def workload() -> None:
        state["calls"] += 1
        sim_clock.now += 1.0e-3 if state["calls"] % 2 else 1.01e-3

    def stop(precision: float) -> tuple[str | None, int]:
        options = LatencyOptions(
            warmup=0.0,
            min_run_time=0.005,
            max_run_time=0.2,
            min_block_time=0.0,
            target_median_precision=precision,
            clock=sim_clock,
        )
        stats = run_latency(workload, options, device=torch.device("cpu")).section.stats
        assert stats is not None
        return stats.stop_reason, stats.blocks

    assert stop(0.01) == ("target_relative_iqr", 7)
    reason, blocks = stop(0.001)
    assert reason == "max_run_time" and blocks > 7


def test_generator_workload_gets_lazy_output_and_no_throughput(sim_clock: SimulatedClock) -> None:
    tick = sim_clock.workload(2**-9)

    def lazy():  # costs 2**-9 s on the clock, then defers its work to a generator
        tick()
        return (torch.ones(1) for _ in range(1))

    report = measure_latency(
        lazy,
        work_units=32,
        options={"warmup": 0.0, "min_run_time": 2**-6, "max_run_time": 2**-4, "clock": sim_clock},
    )
    lat = report.latency
    assert lat is not None
    assert lat.throughput.status == "unavailable"  # 32 units were never done
    # the times measured are those of creating the generator: lower bounds of the real work
    assert lat.first_call.status == "partial" and lat.first_call.known_value == 2**-9
    assert lat.warmed.status == "partial" and lat.warmed.known_value == 2**-9
    assert "lazy_output" in [d.code for d in report.diagnostics]


def test_empty_batch_is_not_complete_throughput(sim_clock: SimulatedClock) -> None:
    model = torch.nn.Linear(8, 4)
    x = torch.randn(0, 8)  # a batch of 0, while work_units claims 32 samples
    tick = sim_clock.workload(2**-9)

    def empty() -> torch.Tensor:
        tick()
        return model(x)

    report = measure_latency(
        empty,
        work_units=32,
        options={"warmup": 2**-9, "min_run_time": 2**-6, "max_run_time": 2**-4, "clock": sim_clock},
    )
    lat = report.latency
    assert lat is not None
    assert lat.throughput.status == "unavailable"  # not 32 / 2**-9 = 16384 samples/s
    assert lat.warmed.status == "complete" and lat.warmed.value == 2**-9  # the call's true time
    empty_work = [d for d in report.diagnostics if d.code == "empty_work"]
    # the probed warm-up call ran t (view) and addmm: 2 operator calls, both empty
    assert len(empty_work) == 1 and empty_work[0].count == 2


def test_non_empty_batch_keeps_its_throughput(sim_clock: SimulatedClock) -> None:
    model = torch.nn.Linear(8, 4)
    x = torch.randn(32, 8)
    tick = sim_clock.workload(2**-9)

    def full() -> torch.Tensor:
        tick()
        return model(x)

    report = measure_latency(
        full,
        work_units=32,
        options={"warmup": 2**-9, "min_run_time": 2**-6, "max_run_time": 2**-4, "clock": sim_clock},
    )
    lat = report.latency
    assert lat is not None
    # 32 samples / 2**-9 s = 16384 samples/s
    assert lat.throughput.status == "complete" and lat.throughput.value == 16384
    assert "empty_work" not in [d.code for d in report.diagnostics]


def test_a_former_flat_keyword_names_its_new_spelling() -> None:
    calls: list[int] = []
    with pytest.raises(TypeError, match=r"measure_latency\(warmup=\.\.\.\) moved into options="):
        measure_latency(lambda: calls.append(1), warmup=0.1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"options=LatencyOptions\(clock=\.\.\.\)"):
        measure_latency(lambda: calls.append(1), clock=lambda: 0.0)  # type: ignore[call-arg]
    from torchscan_stages import measure_workload

    # measure_workload's former synonym, and a timing keyword it never had, name options=
    with pytest.raises(TypeError, match=r"\(latency_options=\.\.\.\) is now options=: pass"):
        measure_workload(lambda: calls.append(1), latency_options={})  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"measure_workload\(max_run_time=\.\.\.\) moved into"):
        measure_workload(lambda: calls.append(1), max_run_time=1.0)  # type: ignore[call-arg]
    assert calls == []  # refused before any call


def test_moved_keywords_never_shadow_a_keyword_of_the_function() -> None:
    # a function that still takes a keyword of its own with a moved name cannot be wrapped:
    # its legitimate keyword would be refused as moved
    def timed(*, warmup: float = 0.0) -> float:
        return warmup

    with pytest.raises(TypeError, match=r"timed has its own keyword\(s\) \['warmup'\]"):
        moved_into_options(options=LatencyOptions)(timed)
