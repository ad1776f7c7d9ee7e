"""The CI gate in-process (commands.compare.main): it fails, passes or says it cannot verify.

Reports are built from synthetic block times, so nothing here reads the host's clock.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from latency_reports import BASE, latency_report

from torchscan_stages.commands.compare import main
from torchscan_stages.compare.gate import gate, gate_row
from torchscan_stages.provenance import build_provenance
from torchscan_stages.report import (
    BenchmarkComparison,
    BenchmarkReport,
    CheckResult,
    MetricResult,
    PerformanceDelta,
)

SLOW = [3 * t for t in BASE]  # every block 3x slower


def _saved(tmp_path: Path, base: BenchmarkReport, cand: BenchmarkReport) -> tuple[Path, Path]:
    return base.save(tmp_path / "base.json"), cand.save(tmp_path / "cand.json")


@pytest.mark.parametrize("threshold", ["nan", "inf", "-inf", "0", "-1", "0.5"])
def test_max_slowdown_nan_inf_or_below_one_is_refused(
    tmp_path: Path, threshold: str, capsys: pytest.CaptureFixture[str]
) -> None:
    base, cand = _saved(tmp_path, latency_report(BASE, "base"), latency_report(SLOW, "cand"))
    assert main([str(base), str(cand), f"--max-slowdown={threshold}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--max-slowdown must be a finite ratio >= 1.0" in err


def test_candidate_with_no_latency_cannot_verify(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cand = latency_report(SLOW, "cand").model_copy(update={"latency": None})
    base_path, cand_path = _saved(tmp_path, latency_report(BASE, "base"), cand)
    assert main([str(base_path), str(cand_path), "--max-slowdown", "1.05"]) == 3
    out = capsys.readouterr().out
    assert "**Gate: CANNOT VERIFY**" in out and "Gate: passed" not in out


def test_candidate_with_empty_blocks_cannot_verify(tmp_path: Path) -> None:
    slow = latency_report(SLOW, "cand")
    assert slow.latency is not None
    empty = slow.model_copy(
        update={"latency": slow.latency.model_copy(update={"block_times_s": []})}
    )
    base_path, cand_path = _saved(tmp_path, latency_report(BASE, "base"), empty)
    assert main([str(base_path), str(cand_path), "--max-slowdown", "1.05"]) == 3


def _comparison(ratio: float, low: float, high: float, verdict: str) -> BenchmarkComparison:
    def seconds(value: float) -> MetricResult:
        return MetricResult.complete(value, unit="s", scope="warmed_block_average", method="x")

    delta = PerformanceDelta(
        metric="latency.warmed",
        unit="s",
        scope="warmed_block_average",
        method="wall_clock_lower_decile",
        baseline=seconds(0.01),
        candidate=seconds(0.01 * ratio),
        ratio=ratio,
        ci_low=low,
        ci_high=high,
        verdict=verdict,  # type: ignore[arg-type]
    )
    return BenchmarkComparison(
        provenance=build_provenance(),
        check=CheckResult(performed=True, passed=True),
        deltas=[delta],
    )


def test_inconclusive_row_is_never_gate_failed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # ratio 1.20 with CI [0.90, 1.50]: the interval reaches both sides of 1 -> it does not
    # decide, so the gate cannot verify 1.05 (exit 3) and must not print FAILED
    path = _comparison(1.20, 0.90, 1.50, "inconclusive").save(tmp_path / "cmp.json")
    assert main([str(path), "--max-slowdown", "1.05"]) == 3
    out = capsys.readouterr().out
    assert "Gate: FAILED" not in out and "**Gate: CANNOT VERIFY**" in out


@pytest.mark.parametrize(
    ("ratio", "low", "high", "violations", "unverified"),
    [
        (1.30, 1.25, 1.35, 1, 0),  # CI low 1.25 > 1 and 1.30 > 1.05: confidently slower
        (1.02, 0.99, 1.04, 0, 0),  # the whole interval <= 1.05: within the budget
        (0.70, 0.65, 0.75, 0, 0),  # faster: CI high 0.75 <= 1.05
        (1.03, 1.01, 1.08, 0, 1),  # 1.03 <= 1.05 but the interval reaches 1.08
        (1.10, 0.98, 1.20, 0, 1),  # above 1.05 but CI low 0.98 <= 1: not decided
    ],
)
def test_gate_rule(ratio: float, low: float, high: float, violations: int, unverified: int) -> None:
    # the verdict its interval gives (min_effect 5%): a loaded comparison must be consistent
    verdict = (
        "slower" if low > 1.0 and ratio > 1.05
        else "faster" if high < 1.0 and ratio < 0.95
        else "no_difference" if low >= 0.95 and high <= 1.05
        else "inconclusive"
    )  # fmt: skip
    outcome = gate(_comparison(ratio, low, high, verdict), 1.05)
    assert (len(outcome.violations), len(outcome.unverified)) == (violations, unverified)


def test_noisy_but_decided_slowdown_fails_the_gate(tmp_path: Path) -> None:
    # base alternates 10 and 12 ms (IQR/median ~18%, above the 5% noise threshold), the
    # candidate is every block x3: lower deciles 10 ms and 30 ms -> ratio 3, decided
    noisy = [0.010 if i % 2 else 0.012 for i in range(20)]
    base_path, cand_path = _saved(
        tmp_path, latency_report(noisy, "base"), latency_report([3 * t for t in noisy], "cand")
    )
    assert main([str(base_path), str(cand_path), "--max-slowdown", "1.05"]) == 1


@pytest.mark.parametrize("flag", ["-o", "--markdown"])
def test_compare_output_onto_an_input_is_refused(
    tmp_path: Path, flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    base_path, cand_path = _saved(
        tmp_path, latency_report(BASE, "base"), latency_report(SLOW, "cand")
    )
    before = base_path.read_bytes()
    assert main([str(base_path), str(cand_path), flag, str(base_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "refusing to overwrite" in err and str(base_path) in err
    assert base_path.read_bytes() == before


def test_output_to_a_directory_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base_path, cand_path = _saved(
        tmp_path, latency_report(BASE, "base"), latency_report(SLOW, "cand")
    )
    assert main([str(base_path), str(cand_path), "-o", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err


def test_gate_markdown_uses_human_units(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base_path, cand_path = _saved(
        tmp_path, latency_report(BASE, "base"), latency_report(SLOW, "cand")
    )
    assert main([str(base_path), str(cand_path), "--max-slowdown", "1.05"]) == 1
    out = capsys.readouterr().out
    # lower decile of BASE: sorted 10.00 (x4), 10.01 (x4) ... -> q(0.1) at h = 1.9 -> 10.0 ms
    assert "| 10.0 ms | 30.0 ms | 3.0000 |" in out
    assert "0.01 s" not in out and "e+" not in out
    assert math.isclose(3.0, 30.0 / 10.0)


@pytest.mark.parametrize(
    ("verdict", "ratio", "low", "high", "outcome"),
    [
        ("slower", 1.03, 1.02, 1.04, "passed"),  # slower (min_effect 2%) but within 1.05
        ("slower", 1.04, 1.02, 1.07, "cannot_verify"),  # within at the point, not the interval
        ("slower", 1.30, 1.25, 1.35, "failed"),
        ("no_difference", 1.03, 0.99, 1.04, "passed"),
        ("no_difference", 1.01, 0.97, 1.06, "cannot_verify"),  # min_effect 10%: reaches 1.06
        ("inconclusive", 2.6, 2.54, 2.76, "cannot_verify"),  # the "fewer than 10 rounds"
    ],
)
def test_the_gate_never_says_more_than_the_row(
    verdict: str, ratio: float, low: float, high: float, outcome: str
) -> None:
    decision = gate_row(_comparison(ratio, low, high, verdict).deltas[0], 1.05)
    assert decision.outcome == outcome, decision.reason
    if verdict == "inconclusive":
        assert decision.reason.startswith("the comparison could not decide: inconclusive")
