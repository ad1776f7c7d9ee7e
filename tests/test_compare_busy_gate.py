"""The gate follows the comparison's refusal under a busy host, and options=/judge= are
accepted by compare_benchmarks and measure_latency (simulated clock and probe only)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from noise_models import SimulatedHost, starved
from simulated_clock import SimulatedClock

from torchscan_stages import Judge, LatencyOptions, compare_benchmarks, measure_latency
from torchscan_stages.commands.compare import main
from torchscan_stages.compare.gate import gate
from torchscan_stages.render.compare_markdown import comparison_markdown


def test_a_busy_host_makes_the_gate_unverifiable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 1.0 ms against 1.3 ms on a host where every call waits 30 ms for a CPU: the workloads
    # get (1 + 1.3 + 1) / (3 x 30 + 3.3) = 3.5% of the wall time as CPU (below 10%), the wall
    # ratio is (1.3 + 30) / (1 + 30) = 1.0097, within what the waiting explains: the row is
    # inconclusive, so the gate cannot verify (exit 3) and never prints FAILED
    sim = SimulatedHost(starved(10**9), seed=0)
    result = compare_benchmarks(
        sim.workload(1e-3),
        sim.workload(1.3e-3),
        check=lambda a, b: True,
        options=LatencyOptions(clock=sim, probe=sim.probe, max_run_time=2.0),
    )
    latency = result.deltas[0]
    assert latency.verdict == "inconclusive"
    assert result.settings["paired"]["host_too_busy"] is True
    assert "host_too_busy" in [d.code for d in result.diagnostics]
    outcome = gate(result, 1.05)
    assert outcome.exit_code == 3 and not outcome.violations
    saved = result.save(tmp_path / "cmp.json")
    assert main([str(saved), "--max-slowdown", "1.05"]) == 3
    out = capsys.readouterr().out
    assert "**Gate: CANNOT VERIFY**" in out
    assert "could not decide: inconclusive: host too busy" in out and "4%" in out
    assert "Gate: FAILED" not in out


def test_a_quiet_comparison_reports_its_rounds_and_control(sim_clock: SimulatedClock) -> None:
    # the same pair without a probe (nothing says the host was busy): slower, with an A/A
    # control delta beside it and the rounds it used in the Markdown
    result = compare_benchmarks(
        sim_clock.workload(1e-3, noise=0.01, seed=1),
        sim_clock.workload(1.3e-3, noise=0.01, seed=2),
        check=lambda a, b: True,
        options={"clock": sim_clock},
    )
    metrics = {d.metric: d for d in result.deltas}
    assert metrics["latency.warmed"].verdict == "slower"
    assert metrics["latency.aa_control"].verdict == "no_difference"
    text = comparison_markdown(result)
    assert "A/A control ratio" in text and "judged on" in text


def test_options_and_judge_objects_are_accepted(sim_clock: SimulatedClock) -> None:
    judge = Judge(min_effect=0.2)  # a 30% slowdown is still beyond a 20% minimum effect
    result = compare_benchmarks(
        sim_clock.workload(1e-3, noise=0.01, seed=1),
        sim_clock.workload(1.3e-3, noise=0.01, seed=2),
        check=lambda a, b: True,
        options={"clock": sim_clock, "max_run_time": 2.0},
        judge=judge,
    )
    assert result.settings["min_effect"] == 0.2 and result.settings["max_run_time_s"] == 2.0
    assert result.deltas[0].verdict == "slower"


def test_each_setting_has_one_way_in(sim_clock: SimulatedClock) -> None:
    calls: list[int] = []

    def workload() -> int:
        calls.append(1)
        return 1

    def compare(**settings: Any) -> object:
        return compare_benchmarks(workload, workload, check=lambda a, b: True, **settings)

    # a former flat keyword names its one way in (for one release); min_blocks is the judge's
    moved = {
        "min_effect": r"compare_benchmarks\(min_effect=\.\.\.\) moved into judge=: pass "
        r"judge=\{'min_effect': \.\.\.\} or judge=Judge\(min_effect=\.\.\.\)",
        "clock": r"\(clock=\.\.\.\) moved into options=: pass options=\{'clock'",
        "min_blocks": r"\(min_blocks=\.\.\.\) moved into judge=",
        "seed": r"\(seed=\.\.\.\) moved into judge=",
    }
    for keyword, message in moved.items():
        with pytest.raises(TypeError, match=message):
            compare(**{keyword: 1}, judge=Judge())
    with pytest.raises(TypeError, match=r"max_run_time=\.\.\.\) moved into options="):
        measure_latency(workload, options=LatencyOptions(), max_run_time=1.0)  # type: ignore[call-arg]
    # what the judge decides, or a comparison never uses, is refused inside options= too
    with pytest.raises(TypeError, match=r"pass judge=\{'max_noise': \.\.\.\} instead"):
        compare(options={"noise_threshold": 0.1})
    with pytest.raises(TypeError, match=r"target_relative_iqr.*is not used by a comparison"):
        compare(options=LatencyOptions(target_relative_iqr=0.01))
    with pytest.raises(ValueError, match="unknown key"):
        compare(judge={"min_efect": 0.1})
    assert calls == []  # refused before any call


def test_the_judge_sets_the_rounds_sampled_and_recorded(sim_clock: SimulatedClock) -> None:
    # a LatencyOptions object keeps measure_latency's min_blocks (7); a comparison samples
    # and judges by the judge's (12), and records that one value. Once the rounds stopped at
    # the object's 7 (interval already narrow) and the judge, wanting more, said inconclusive
    # on this plain 1.3x slowdown, with min_blocks 7 in the record
    result = compare_benchmarks(
        sim_clock.workload(1e-3, noise=0.01, seed=1),
        sim_clock.workload(1.3e-3, noise=0.01, seed=2),
        check=lambda a, b: True,
        options=LatencyOptions(clock=sim_clock),
        judge={"min_blocks": 12, "max_noise": 0.2},
    )
    assert (result.settings["min_blocks"], result.settings["noise_threshold"]) == (12, 0.2)
    assert result.settings["rounds"] >= 12
    assert "target_relative_iqr" not in result.settings  # measure_latency's rule, unused
    assert result.deltas[0].verdict == "slower"  # 1.3 ms vs 1.0 ms, +-1% noise


def test_measure_latency_takes_options(sim_clock: SimulatedClock) -> None:
    report = measure_latency(
        sim_clock.workload(1e-3), options=LatencyOptions(clock=sim_clock, max_run_time=0.2)
    )
    assert report.latency is not None and report.latency.settings["max_run_time_s"] == 0.2


def test_a_saved_interleaved_comparison_is_recomputed_by_the_gate(
    sim_clock: SimulatedClock, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 1.3x slower, saved: the gate recomputes the paired verdict from the recorded rounds
    # (control blocks and probe readings kept in interleaved_rounds) and fails it (exit 1);
    # the same file with its A/A control's blocks edited no longer follows: refused (exit 2)
    result = compare_benchmarks(
        sim_clock.workload(1e-3, noise=0.01, seed=1),
        sim_clock.workload(1.3e-3, noise=0.01, seed=2),
        check=lambda a, b: True,
        options={"clock": sim_clock},
    )
    saved = result.save(tmp_path / "cmp.json")
    assert main([str(saved), "--max-slowdown", "1.05"]) == 1
    assert "**Gate: FAILED**" in capsys.readouterr().out
    assert result.interleaved_rounds is not None
    rounds = dict(result.interleaved_rounds)
    rounds["control_blocks_s"] = [1.2 * b for b in rounds["control_blocks_s"]]
    edited = result.model_copy(update={"interleaved_rounds": rounds})
    path = edited.save(tmp_path / "edited.json")
    assert main([str(path), "--max-slowdown", "1.05"]) == 2
    assert "does not follow from its own block times" in capsys.readouterr().err
