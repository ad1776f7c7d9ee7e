"""Large effects on a busy host (compare/loaded.py): a verdict with a "loaded host" note when
the interval lies beyond what the run's own A/A control and waiting can explain; an A/A
pair never gets one. Injected rounds only (tests/noise_models.py), no real clock."""

from __future__ import annotations

from pathlib import Path

import pytest
from noise_models import SimulatedHost, bursts, preempted, quiet, simulate

from torchscan_stages import LatencyOptions, compare_benchmarks
from torchscan_stages.commands.compare import main
from torchscan_stages.compare.deltas import Judge
from torchscan_stages.compare.judging import paired_deltas
from torchscan_stages.compare.loaded import disturbance
from torchscan_stages.compare.paired import paired_sides

LOADS = {
    "60% of blocks preempted 0.5-1.5 ms": preempted(0.6, 1e-3),
    "90% of blocks preempted 0.5-1.5 ms": preempted(0.9, 1e-3),
    "60% of blocks preempted 2-6 ms": preempted(0.6, 4e-3),
    "bursts, every burst block preempted": bursts(hit=1.0),
}


def _all_preempted(run):  # type: ignore[no-untyped-def]
    """Every block saw an involuntary switch: no round is undisturbed (the rule's busy case)."""
    for trace in run.traces:
        trace.involuntary[:] = [1] * len(trace.involuntary)
    return run


@pytest.mark.parametrize("load", list(LOADS))
@pytest.mark.parametrize("rounds", [13, 40])
def test_a_a_never_gets_a_verdict_at_any_injected_pressure(load: str, rounds: int) -> None:
    # 30 seeds each: identical workloads, every block with an involuntary switch; whether
    # the host counts as busy or not, none of them may come out faster or slower
    verdicts = {
        paired_deltas(
            _all_preempted(simulate(1.0, LOADS[load], rounds=rounds, seed=seed)),
            Judge(),
            "wall_clock",
            None,
        ).latency.verdict
        for seed in range(30)
    }
    assert not verdicts & {"faster", "slower"}, verdicts


def test_a_3x_slowdown_on_a_busy_host_is_slower_with_a_loaded_host_note() -> None:
    # 90% of blocks lose 0.5-1.5 ms (a time slice to one of 2 busy processes per core) and
    # every block has an involuntary switch: 0 of 40 rounds undisturbed, so the plain rule
    # declines; the 3x candidate's interval lies above both the A/A control's and the
    # waiting's bound in every one of 20 seeds
    for seed in range(20):
        run = _all_preempted(simulate(3.0, preempted(0.9, 1e-3), rounds=40, seed=seed))
        outcome = paired_deltas(run, Judge(), "wall_clock", None)
        latency = outcome.latency
        assert latency.verdict == "slower", latency.reason
        assert (latency.reason or "").startswith("loaded host: ")
        assert outcome.summary["host_too_busy"] and outcome.summary["loaded_host_verdict"]
        bound = outcome.summary["disturbance_bound"]
        assert latency.ci_low is not None and latency.ci_low > bound > 1.0
        codes = [d.code for d in outcome.diagnostics]
        assert codes == ["verdict_on_loaded_host"]


def test_the_demo_21x_on_13_disturbed_rounds_is_slower() -> None:
    # the demo: 21x slower, 0 of 13 rounds undisturbed: the ratio's lower end (the
    # 3rd smallest of 13 per-round ratios, k = 3 at 95%) is far above any load effect
    run = _all_preempted(simulate(21.0, preempted(0.6, 1e-3), rounds=13, seed=3))
    latency = paired_deltas(run, Judge(), "wall_clock", None).latency
    assert latency.verdict == "slower", latency.reason
    assert len((latency.reason or "").split("; ")[0]) < 160


def test_uniform_waiting_at_5_percent_cpu_share_does_not_hide_a_1_3x_effect() -> None:
    # every block's CPU time is 5% of its wall time (below min_cpu_share 10%: busy), but the
    # waiting is uniform, so per round wall/CPU over wall/CPU = 20 / 20 = 1: the wall ratio
    # is the CPU-time ratio, 1.3; the A/A control shows at most 1.01 / 0.99 = 1.0202 per
    # round (quiet +-1% jitter). The interval [~1.28, ~1.32] lies beyond both: slower.
    run = simulate(1.3, quiet(), seed=1)
    for trace in run.traces:
        trace.cpu_s[:] = [0.05 * wall for wall in trace.wall_s]
    found = disturbance(paired_sides(run, 10), (run.baseline_trace, run.candidate_trace), 10, 0.95)
    assert found is not None
    assert 1.0 <= found.aa <= 1.0202
    assert found.slower == pytest.approx(1.0) and found.faster == pytest.approx(1.0)
    latency = paired_deltas(run, Judge(), "wall_clock", None).latency
    assert latency.verdict == "slower" and "loaded host" in (latency.reason or "")


def test_a_1_3x_with_preemptions_on_both_sides_stays_inconclusive() -> None:
    # 90% of blocks lose 2-6 ms on a 1 ms baseline: identical blocks differ by up to ~7x in a
    # round (1 + 6 ms against 1 ms), far more than 1.3: the busy host's refusal stands, and says why
    run = _all_preempted(simulate(1.3, preempted(0.9, 4e-3), rounds=40, seed=2))
    latency = paired_deltas(run, Judge(), "wall_clock", None).latency
    assert latency.verdict == "inconclusive"
    assert (latency.reason or "").startswith("host too busy: ")
    assert "is not beyond what the load explains" in (latency.reason or "")


def test_a_comparison_saved_before_the_rule_cannot_verify_and_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a 21x pair on a host where 90% of calls lose 0.5-1.5 ms: today slower (loaded host);
    # the same file as the old rule wrote it (its rows inconclusive, "host too busy") is not
    # an edit: the gate keeps the recorded row, cannot verify (exit 3) and says how to rejudge
    sim = SimulatedHost(preempted(0.9, 1e-3), seed=0)
    result = compare_benchmarks(
        sim.workload(1e-3),
        sim.workload(21e-3),
        check=lambda a, b: True,
        options=LatencyOptions(clock=sim, probe=sim.probe, max_run_time=2.0),
    )
    assert result.deltas[0].verdict == "slower"
    old = [
        d.model_copy(update={"verdict": "inconclusive", "reason": "host too busy: ..."})
        if d.metric in ("latency.warmed", "throughput")
        else d
        for d in result.deltas
    ]
    path = result.model_copy(update={"deltas": old}).save(tmp_path / "old.json")
    assert main([str(path), "--max-slowdown", "1.05"]) == 3
    out = capsys.readouterr().out
    assert "Gate: FAILED" not in out and "**Gate: CANNOT VERIFY**" in out
    assert "was judged before the loaded-host rule" in out
