"""The interleaved verdict rule on injected samples: sign-test intervals of per-round
ratios, undisturbed pairs, the in-run A/A control and the busy-host refusal, under
generated non-stationary noise (drift, bursts, a period of about one round)."""

from __future__ import annotations

import pytest
from noise_models import bursts, drift, fixed_alternation, periodic, preempted, quiet, simulate

from torchscan_stages.compare.deltas import Judge
from torchscan_stages.compare.interleave import latency_verdict, ratio_of_locations
from torchscan_stages.compare.judging import paired_deltas
from torchscan_stages.compare.paired import paired_ratio, sign_test_rank
from torchscan_stages.report import HostPressure, HostState

RUNS = 60
NOISES = {
    "drift 1x -> 3x": lambda: drift(600),
    "bursts": bursts,
    "period of 3 blocks": periodic,
    "period of 4 blocks": lambda: periodic(4.0),
    "quiet": quiet,
}


@pytest.mark.parametrize(
    ("n", "rank"),
    # 2 P(Bin(n, 1/2) <= k - 1) <= 5%: n = 5 has 2/32 = 6.25% even for k = 1 (no interval);
    # n = 6: 2/64 = 3.1% (k = 1) but 2 x 7/64 = 21.9% (k = 2); n = 20: 2 x 0.0207 = 4.1%
    # for k = 6; n = 100: 2 x 0.0176 = 3.5% for k = 40, 2 x 0.0284 = 5.7% for k = 41
    [(5, None), (6, 1), (20, 6), (100, 40)],
)
def test_sign_test_rank_matches_the_binomial_table(n: int, rank: int | None) -> None:
    assert sign_test_rank(n, 0.95) == rank


def test_paired_ratio_is_the_median_of_round_ratios() -> None:
    # 7 rounds with ratios 1.1, 1.2, ..., 1.7 (baseline 1 s): median 1.4; n = 7 at 95%
    # gives rank 1 (2/128 = 1.6%; k = 2 would be 2 x 8/128 = 12.5%): [1.1, 1.7]
    cand = [1.0 + 0.1 * k for k in range(1, 8)]
    estimate = paired_ratio([1.0] * 7, cand, confidence=0.95)
    assert estimate.ratio == pytest.approx(1.4)
    assert (estimate.low, estimate.high) == (pytest.approx(1.1), pytest.approx(1.7))


@pytest.mark.parametrize("noise", sorted(NOISES))
def test_a_a_is_never_confident_under_non_stationary_noise(noise: str) -> None:
    verdicts = [
        paired_deltas(
            simulate(1.0, NOISES[noise](), seed=seed), Judge(), "wall_clock", None
        ).latency.verdict
        for seed in range(RUNS)
    ]
    assert not {"faster", "slower"} & set(verdicts), verdicts


def test_the_old_fixed_alternation_is_fooled_by_a_period_of_four_blocks() -> None:
    # why the order is random: a load with a period of 4 blocks (factors 1.0, 1.5, 1.0, 0.5)
    # under AB, BA rounds gives A the slots 0 and 3 (1.0 and 0.5 ms) and B the slots 1 and 2
    # (1.5 and 1.0 ms): lower deciles 0.5 and 1.0 ms, so the old rule calls A/A "slower" at
    # 1.0 / 0.5 = 2.0; the random order never lines up with it (test above)
    base, cand = fixed_alternation(1.0, periodic(4.0), seed=0)
    old = ratio_of_locations(base, cand, confidence=0.95, resamples=300, paired=True)
    assert latency_verdict(old, min_effect=0.05)[0] == "slower"
    assert old.ratio == pytest.approx(2.0)


@pytest.mark.parametrize("noise", ["drift 1x -> 3x", "bursts", "quiet"])
def test_a_known_effect_is_found_and_covered(noise: str) -> None:
    # candidate 1.3 ms against 1 ms: slower in every run, the interval holds 1.3 in >= 95%
    results = [
        paired_deltas(simulate(1.3, NOISES[noise](), seed=seed), Judge(), "wall_clock", None)
        for seed in range(RUNS)
    ]
    assert all(r.latency.verdict == "slower" for r in results)
    covered = sum(r.latency.ci_low <= 1.3 <= r.latency.ci_high for r in results)  # type: ignore[operator]
    assert covered >= 0.95 * RUNS, covered


def test_a_small_effect_is_found_on_a_quiet_host() -> None:
    # 1.05 ms against 1 ms with +-1% jitter and a 2% minimum effect: slower every time
    judge = Judge(min_effect=0.02)
    verdicts = [
        paired_deltas(simulate(1.05, quiet(), seed=seed), judge, "wall_clock", None).latency.verdict
        for seed in range(RUNS)
    ]
    assert verdicts.count("slower") == RUNS


def test_preempted_pairs_are_set_aside() -> None:
    # bursts preempt blocks by 3 ms (an involuntary switch in the probe); the pairs kept are
    # the undisturbed ones, so the ratio stays 1.3 (a median over every pair drifts to 1)
    run = simulate(1.3, bursts(hit=0.9), seed=3)
    outcome = paired_deltas(run, Judge(), "wall_clock", None)
    assert outcome.summary["rounds_used"] < outcome.summary["rounds"]
    assert outcome.latency.ratio == pytest.approx(1.3, rel=0.02)
    assert outcome.latency.verdict == "slower"


def _busy_host() -> HostState:
    return HostState(
        logical_cpus=2,
        load_average_start=[26.0, 25.0, 20.0],
        load_average_end=[27.0, 25.0, 20.0],
        busy_processes=24,
        loaded=True,
        pressure=HostPressure(usable_cpus=2.0, psi_some_share=0.97, niced_busy_processes=20),
    )


def test_a_busy_host_refuses_a_verdict_and_names_the_pressure() -> None:
    # CPU time is 5% of wall time on every block: below the 10% min_cpu_share; 90% of the
    # blocks were preempted for 2-6 ms (identical blocks up to ~7x apart in a round), so a
    # 1.3x is within what the load explains: refused, naming what was measured
    run = simulate(1.3, preempted(0.9, 4e-3), seed=1)
    for trace in run.traces:
        trace.cpu_s[:] = [0.05 * wall for wall in trace.wall_s]
    outcome = paired_deltas(run, Judge(), "wall_clock", _busy_host())
    assert outcome.latency.verdict == "inconclusive"
    assert outcome.summary["cpu_share"] == pytest.approx(0.05)
    [diagnostic] = [d for d in outcome.diagnostics if d.code == "host_too_busy"]
    assert "5%" in diagnostic.message and "PSI cpu some 97%" in diagnostic.message
    assert "20 of them niced" in diagnostic.message


def test_too_few_undisturbed_rounds_refuse_a_verdict() -> None:
    # every block preempted (an involuntary switch, CPU a quarter of its wall time): 0 of 200
    # rounds ran undisturbed, fewer than min_blocks 10; 90% of blocks lost 2-6 ms, so
    # identical blocks differ by far more than 1.3 in a round: no loaded-host verdict either
    run = simulate(1.3, preempted(0.9, 4e-3), seed=2)
    for trace in run.traces:
        trace.involuntary[:] = [1] * len(trace.involuntary)
        trace.cpu_s[:] = [0.25 * wall for wall in trace.wall_s]
    outcome = paired_deltas(run, Judge(), "wall_clock", None)
    assert outcome.latency.verdict == "inconclusive"
    assert outcome.summary["undisturbed_rounds"] == 0
    assert "only 0 of 200 rounds" in (outcome.latency.reason or "")


def test_a_distinguishable_a_a_control_refuses_a_verdict() -> None:
    # the control blocks run 10% slower than the baseline's (something in the run tells a
    # workload from itself): the A/A control is "slower", so the A/B verdict is withdrawn
    run = simulate(1.3, quiet(), seed=4)
    run.control_blocks[:] = [1.1 * b for b in run.baseline_blocks]
    outcome = paired_deltas(run, Judge(), "wall_clock", None)
    assert outcome.control is not None and outcome.control.verdict == "slower"
    assert outcome.latency.verdict == "inconclusive"
    assert "A/A control" in (outcome.latency.reason or "")


def test_the_interval_is_widened_by_the_control_offset() -> None:
    # no interval floor; a control equal to the baseline (offset 0) against one 2% above it
    # in every round (below the 5% effect: no refusal): the A/B interval's ends move out by
    # exactly a factor 1.02 (log 1.02 = 0.0198 on each side)
    judge = Judge(ci_floor=0.0)
    run = simulate(1.3, quiet(), seed=5)
    run.control_blocks[:] = list(run.baseline_blocks)
    plain = paired_deltas(run, judge, "wall_clock", None).latency
    run.control_blocks[:] = [1.02 * b for b in run.baseline_blocks]
    wide = paired_deltas(run, judge, "wall_clock", None).latency
    assert plain.ci_low is not None and wide.ci_low is not None
    assert plain.ci_high is not None and wide.ci_high is not None
    assert plain.ci_low / wide.ci_low == pytest.approx(1.02)
    assert wide.ci_high / plain.ci_high == pytest.approx(1.02)
    assert wide.ratio == plain.ratio and wide.verdict == "slower"


def test_cpu_time_is_a_separate_metric() -> None:
    # CPU time per call 1.3 / 1 (the probe's CPU is cost x factor): its own delta, labelled
    outcome = paired_deltas(simulate(1.3, bursts(), seed=6), Judge(), "wall_clock", None)
    assert outcome.cpu_time is not None
    assert outcome.cpu_time.metric == "cpu_time.warmed"
    assert outcome.cpu_time.method == "process_cpu_time_paired_median"
    assert outcome.cpu_time.ratio == pytest.approx(1.3, rel=0.02)
