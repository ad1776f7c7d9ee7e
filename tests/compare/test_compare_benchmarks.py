"""compare_benchmarks: output check first, interleaved timing, verdicts from intervals."""

from __future__ import annotations

import io
import random
from collections.abc import Callable

import pytest
import torch
from simulated_clock import SimulatedClock

from torchscan_stages.compare.benchmarks import compare_benchmarks
from torchscan_stages.compare.interleave import (
    RatioEstimate,
    latency_verdict,
    ratio_of_locations,
)
from torchscan_stages.measure.latency import measure_latency
from torchscan_stages.render import render_report
from torchscan_stages.report import BenchmarkComparison, load_report


def _always(passed: bool) -> Callable[[object, object], bool]:
    return lambda base, cand: passed


def _busy(units: int) -> Callable[[], int]:
    """A real (cheap) workload for tests that assert no timing: it returns ``units``."""
    return lambda: units


def test_a_a_is_never_faster_or_slower(sim_clock: SimulatedClock) -> None:
    # both sides cost 1 ms +- 2% (uniform, seeded): no verdict may claim a difference
    verdicts = [
        compare_benchmarks(
            sim_clock.workload(1e-3, noise=0.02, seed=2 * i),
            sim_clock.workload(1e-3, noise=0.02, seed=2 * i + 1),
            check=_always(True),
            options={"clock": sim_clock},
        )
        .deltas[0]
        .verdict
        for i in range(10)
    ]
    assert not {"faster", "slower"} & set(verdicts), verdicts


def test_thirty_percent_slower_candidate(sim_clock: SimulatedClock) -> None:
    # baseline 1 ms, candidate 1.3 ms per call, each +- 1%: true ratio 1.3 / 1 = 1.3
    result = compare_benchmarks(
        sim_clock.workload(1e-3, noise=0.01, seed=1),
        sim_clock.workload(1.3e-3, noise=0.01, seed=2),
        check=_always(True),
        options={"clock": sim_clock},
    )
    latency = result.deltas[0]
    assert latency.metric == "latency.warmed"
    assert latency.verdict == "slower", latency.reason
    assert latency.ci_low is not None and latency.ci_high is not None
    assert latency.ci_low <= 1.3 <= latency.ci_high, (latency.ci_low, latency.ci_high)
    assert latency.ratio == pytest.approx(1.3, rel=0.01)  # block means of +-1% noise
    throughput = result.deltas[1]
    assert throughput.metric == "throughput"
    assert throughput.ratio == pytest.approx(1 / latency.ratio)  # type: ignore[operator]


def test_failed_check_withholds_every_delta(sim_clock: SimulatedClock) -> None:
    def check(base: int, cand: int) -> dict[str, object]:
        error = abs(base - cand) / base  # outputs 10 and 11 -> relative error 0.1
        return {"passed": error <= 1e-3, "detail": f"relative error {error}", "tolerance": 1e-3}

    result = compare_benchmarks(
        sim_clock.workload(1e-3, output=10),
        sim_clock.workload(0.5e-3, output=11),  # looks 2x faster, but its outputs are wrong
        check=check,
        options={"clock": sim_clock},
    )
    assert result.check.performed and result.check.passed is False
    assert result.check.tolerance == 1e-3
    assert result.check.detail == "relative error 0.1"
    assert result.deltas and all(d.verdict == "withheld" and d.withheld for d in result.deltas)
    assert result.deltas[0].ratio == pytest.approx(0.5)  # still visible, only marked
    assert any(d.code == "check_failed" for d in result.diagnostics)
    assert load_report(result.model_dump_json()) == result
    page = render_report(result)
    assert "withheld" in page and "<script" not in page


def test_check_that_raises_is_a_failed_check() -> None:
    def check(base: object, cand: object) -> bool:
        raise RuntimeError("shapes differ")

    result = compare_benchmarks(_busy(1), _busy(1), check=check, options={"min_run_time": 0.05})
    assert result.check.passed is False
    assert result.check.error == "RuntimeError: shapes differ"


def test_ci_floor_must_stay_below_min_effect() -> None:
    with pytest.raises(ValueError, match="ci_floor must be in"):
        compare_benchmarks(_busy(1), _busy(1), check=_always(True), judge={"ci_floor": 0.05})


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ({"work_units": -1}, "work_units must be a finite number > 0"),
        ({"options": {"min_run_time": -2.0}}, "min_run_time must be finite"),
        ({"unit": ""}, "unit must be a non-empty string"),
        # bool is no count
        ({"judge": {"min_blocks": True}}, "min_blocks must be an int >= 3, got True"),
        ({"judge": {"resamples": 99}}, "resamples must be an int >= 100, got 99"),
        ({"options": {"min_blocks": 5}}, r"the judge decides this; pass judge=\{'min_blocks'"),
    ],
)
def test_bad_timing_options_are_refused_before_any_call(
    option: dict[str, object], message: str
) -> None:
    calls: list[str] = []
    with pytest.raises((TypeError, ValueError), match=message):
        compare_benchmarks(
            lambda: calls.append("base"),
            lambda: calls.append("cand"),
            check=_always(True),
            **option,  # type: ignore[arg-type]
        )
    assert calls == []  # neither workload ran


def test_check_is_required_for_workloads() -> None:
    with pytest.raises(TypeError, match=r"check=\.\.\.\) is required"):
        compare_benchmarks(_busy(1), _busy(1))


def test_saved_reports_record_check_not_performed(sim_clock: SimulatedClock) -> None:
    base = measure_latency(
        sim_clock.workload(1e-3, noise=0.01, seed=1),
        options={"clock": sim_clock},
    )
    cand = measure_latency(
        sim_clock.workload(2e-3, noise=0.01, seed=2),
        options={"clock": sim_clock},
    )
    result = compare_benchmarks(base, cand)
    assert isinstance(result, BenchmarkComparison)
    assert (result.check.performed, result.check.passed) == (False, None)
    assert result.deltas[0].verdict == "slower"  # 2 ms vs 1 ms per call -> ratio 2
    assert result.deltas[0].ratio == pytest.approx(2.0, rel=0.01)


def test_saved_reports_from_different_devices_are_not_comparable() -> None:
    base = measure_latency(
        _busy(2),
        options={"min_run_time": 0.1},
    )
    cand = base.model_copy(
        update={"execution": base.execution.model_copy(update={"device": "cuda:0"})}
    )
    cand = cand.model_copy(
        update={"provenance": cand.provenance.model_copy(update={"torch_version": "9.9"})}
    )
    result = compare_benchmarks(base, cand)
    assert {d.verdict for d in result.deltas} == {"not_comparable"}
    messages = [d.message for d in result.diagnostics if d.code == "not_comparable"]
    assert "device is different: baseline='cpu', candidate='cuda:0'" in messages
    assert any(m.startswith("torch_version is different") for m in messages)


def test_saved_reports_with_check_record_it_not_performed() -> None:
    base = measure_latency(
        _busy(1),
        options={"min_run_time": 0.05},
    )
    result = compare_benchmarks(base, base, check=_always(True))
    assert (result.check.performed, result.check.passed) == (False, None)
    assert "check_not_performed" in [d.code for d in result.diagnostics]


def test_tensor_check_answers_and_infinite_tolerance() -> None:
    base = torch.ones(3)

    def check(a: object, b: object) -> dict[str, object]:
        return {"passed": (base == base).all(), "tolerance": float("inf")}

    result = compare_benchmarks(
        lambda: base, lambda: base, check=check, options={"min_run_time": 0.02}
    )
    assert result.check.passed is True  # a 0-dim bool tensor counts as True
    assert result.check.tolerance == "inf"  # JSON has no infinity: kept as its repr
    assert load_report(result.model_dump_json()) == result
    plain = compare_benchmarks(
        lambda: base,
        lambda: base,
        check=lambda a, b: (a == b).all(),
        options={"min_run_time": 0.02},
    )
    assert plain.check.passed is True


def test_ratio_of_medians_paired_bootstrap() -> None:
    base = [1.0, 1.1, 0.9, 1.0, 1.05]
    cand = [2.0, 2.2, 1.8, 2.0, 2.1]  # every round exactly twice the baseline
    estimate = ratio_of_locations(
        base, cand, level=0.5, confidence=0.95, resamples=500, paired=True
    )
    # medians 1.0 and 2.0 -> 2.0; paired resamples keep each round's 2x -> interval [2, 2]
    assert (estimate.ratio, estimate.low, estimate.high) == pytest.approx((2.0, 2.0, 2.0))
    floored = ratio_of_locations(
        base, cand, level=0.5, confidence=0.95, resamples=500, paired=True, floor=0.005
    )
    # the floor widens the zero-width interval to 2.0 x (1 -/+ 0.005) = [1.99, 2.01]
    assert (floored.low, floored.high) == pytest.approx((1.99, 2.01))


@pytest.mark.parametrize(
    ("ratio", "low", "high", "verdict"),
    [
        (1.30, 1.25, 1.35, "slower"),
        (0.70, 0.65, 0.75, "faster"),
        (1.01, 0.99, 1.03, "no_difference"),
        (1.03, 1.01, 1.06, "inconclusive"),  # above 1 but within the 5% minimum effect
        (1.20, 0.90, 1.50, "inconclusive"),  # the interval reaches both sides of 1
    ],
)
def test_latency_verdicts(ratio: float, low: float, high: float, verdict: str) -> None:
    estimate = RatioEstimate(ratio, low, high, 0.95, 1000, True)
    assert latency_verdict(estimate, min_effect=0.05)[0] == verdict


def test_flop_and_memory_deltas_use_complete_values_of_one_scope() -> None:
    small, large = torch.randn(8, 8), torch.randn(16, 16)
    result = compare_benchmarks(
        lambda: small @ small,
        lambda: large @ large,
        check=_always(True),
        memory=True,
        flops=True,
        options={"min_run_time": 0.02},
    )
    by_metric = {d.metric: d for d in result.deltas}
    flops = by_metric["flops.workload"]
    # mm FLOPs: 2 * 8^3 = 1024 vs 2 * 16^3 = 8192 -> ratio 8
    assert (flops.baseline.value, flops.candidate.value) == (1024, 8192)
    assert (flops.ratio, flops.verdict) == (8.0, "increased")
    products = by_metric["product_flops.workload"]  # an mm is all tensor products
    assert (products.baseline.value, products.candidate.value, products.ratio) == (1024, 8192, 8.0)
    memory = by_metric["memory.cpu_tracked_tensors"]
    # output tensors: 8*8*4 = 256 bytes vs 16*16*4 = 1024 bytes -> ratio 4
    assert (memory.baseline.value, memory.candidate.value, memory.ratio) == (256, 1024, 4.0)
    assert result.candidate is not None and result.candidate.flops is not None


def test_saved_reports_compare_their_flops() -> None:
    from torchscan_stages.face import measure_workload

    small, large = torch.randn(8, 8), torch.randn(16, 16)
    base = measure_workload(lambda: small @ small, latency=False, memory=False, progress=False)
    cand = measure_workload(lambda: large @ large, latency=False, memory=False, progress=False)
    result = compare_benchmarks(base, cand)
    assert [(d.metric, d.ratio) for d in result.deltas] == [
        ("flops.workload", 8.0),
        ("product_flops.workload", 8.0),
    ]


def test_reports_from_another_package_version_are_not_comparable() -> None:
    from torchscan_stages.face import measure_workload
    from torchscan_stages.provenance import environment_fingerprint, environment_hash

    a = torch.randn(8, 8)
    quiet = {"latency": False, "memory": False, "progress": False, "file": io.StringIO()}
    base = measure_workload(lambda: a @ a, **quiet)
    # the same environment with the package before the counting conventions changed
    older = {**environment_fingerprint(), "package_version": "0.1.0"}
    assert environment_hash(older) != base.provenance.env_hash
    old = base.model_copy(
        update={
            "provenance": base.provenance.model_copy(
                update={"package_version": "0.1.0", "env_hash": environment_hash(older)}
            )
        }
    )
    result = compare_benchmarks(old, base)
    assert {d.verdict for d in result.deltas} == {"not_comparable"}
    assert any(d.message.startswith("env_hash is different") for d in result.diagnostics)


def test_saved_reports_with_different_latency_methods_are_diagnosed(
    sim_clock: SimulatedClock,
) -> None:
    # regression: the method mismatch was appended after the diagnostics were built, so the
    # verdict turned not_comparable with no diagnostic saying why
    base = measure_latency(
        sim_clock.workload(1e-3, seed=1),
        options={"clock": sim_clock},
    )
    cand = measure_latency(
        sim_clock.workload(1e-3, seed=2),
        options={"clock": sim_clock},
    )
    assert cand.latency is not None
    synced = cand.latency.warmed.model_copy(update={"method": "wall_clock_synchronized"})
    cand = cand.model_copy(update={"latency": cand.latency.model_copy(update={"warmed": synced})})
    result = compare_benchmarks(base, cand)
    assert {d.verdict for d in result.deltas} == {"not_comparable"}
    messages = [d.message for d in result.diagnostics if d.code == "not_comparable"]
    assert messages == [
        "latency method is different: baseline='wall_clock', candidate='wall_clock_synchronized'"
    ]


def _interfered(
    clock: SimulatedClock, cost_s: float, *, hit: float, delay_s: float, seed: int
) -> Callable[[], object]:
    """A CPU-bound call the simulated host sometimes preempts: with probability ``hit`` a
    call is delayed by ``delay_s`` (interference only ever adds time)."""
    rng = random.Random(seed)

    def call() -> object:
        clock.now += cost_s + (delay_s if rng.random() < hit else 0.0)
        return 1

    return call


def test_loaded_host_keeps_a_valid_interval(sim_clock: SimulatedClock) -> None:
    # 1.0 ms vs 1.3 ms calls; 30% of calls lose 3 ms to another process. A median ratio is
    # pulled towards 1 ((1.3+0.9)/(1.0+0.9) ~ 1.16); the lower decile of blocks of one call
    # is an untouched call on both sides, so the interval still covers 1.3
    result = compare_benchmarks(
        _interfered(sim_clock, 1.0e-3, hit=0.3, delay_s=3e-3, seed=1),
        _interfered(sim_clock, 1.3e-3, hit=0.3, delay_s=3e-3, seed=2),
        check=_always(True),
        options={"clock": sim_clock, "max_run_time": 2.0},
    )
    latency = result.deltas[0]
    assert latency.ci_low is not None and latency.ci_high is not None
    assert latency.ci_low <= 1.3 <= latency.ci_high, (latency.ci_low, latency.ci_high)
    # noisy blocks (IQR/median far above 5%) but a decided interval: slower, with a warning
    assert latency.verdict == "slower", latency.reason
    assert "noise warning" in (latency.reason or "")
    assert "latency_noisy" in [d.code for d in result.diagnostics]


def test_sampling_stops_when_the_interval_is_narrow(sim_clock: SimulatedClock) -> None:
    # +-1% noise on 1 ms vs 1.3 ms: the paired interval is far narrower than 5% after the
    # first check (min_blocks rounds once min_run_time passed), long before the 8 s budget
    result = compare_benchmarks(
        sim_clock.workload(1e-3, noise=0.01, seed=1),
        sim_clock.workload(1.3e-3, noise=0.01, seed=2),
        check=_always(True),
        options={"clock": sim_clock},
    )
    assert result.settings["stop_reason"] == "interval_narrower_than_min_effect"
    latency = result.deltas[0]
    assert latency.ci_low is not None and latency.ci_high is not None and latency.ratio
    assert (latency.ci_high - latency.ci_low) / latency.ratio < 0.05


def test_sampling_stops_at_the_time_budget(sim_clock: SimulatedClock) -> None:
    # +-90% noise per call on two equal sides: the interval cannot narrow below 0.1% within
    # a 0.3 s simulated budget, so the budget stops it and the verdict stays undecided
    result = compare_benchmarks(
        sim_clock.workload(1e-3, noise=0.9, seed=1),
        sim_clock.workload(1e-3, noise=0.9, seed=2),
        check=_always(True),
        options={"clock": sim_clock, "min_run_time": 0.1, "max_run_time": 0.3},
        judge={"min_effect": 0.001, "ci_floor": 0.0},
    )
    assert result.settings["stop_reason"] == "time_budget"
    # the seeded samples give a ratio interval of about [0.53, 1.76]: it holds 1 and is far
    # wider than the +-0.1% band, so neither a difference nor equivalence is shown
    assert result.deltas[0].verdict == "inconclusive"


def test_lower_decile_location_ignores_upper_contamination() -> None:
    # 100 rounds: the baseline is 1.0 in 40 of them and 3.0 (preempted) in 60; the candidate
    # 1.3 and 3.3 in the same rounds. Medians: 3.0 and 3.3 -> 1.1, pulled towards 1; lower
    # deciles: 1.0 and 1.3 -> 1.3 exactly, the workloads' own ratio
    base = [3.0 if i % 10 < 6 else 1.0 for i in range(100)]
    cand = [b + 0.3 for b in base]
    median = ratio_of_locations(base, cand, level=0.5, confidence=0.95, resamples=200, paired=True)
    assert median.ratio == pytest.approx(1.1)
    estimate = ratio_of_locations(base, cand, confidence=0.95, resamples=500, paired=True)
    assert estimate.ratio == pytest.approx(1.3)
    # every paired resample keeps >= 10% untouched rounds with overwhelming probability
    assert estimate.low == pytest.approx(1.3) and estimate.high == pytest.approx(1.3)
