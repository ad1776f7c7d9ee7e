"""The compare command as a subprocess: Markdown out, exit codes as a CI gate."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from latency_reports import BASE, latency_report

from torchscan_stages.provenance import build_provenance
from torchscan_stages.report import (
    BenchmarkComparison,
    CheckResult,
)

SLOW = [1.3 * t for t in BASE]  # every block 30% slower


def _run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "torchscan_stages", "compare", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_gate_fails_on_confident_slowdown(tmp_path: Path) -> None:
    base = latency_report(BASE, "base").save(tmp_path / "base.json")
    cand = latency_report(SLOW, "cand").save(tmp_path / "cand.json")
    result = _run(base, cand, "--max-slowdown", "1.05", "-o", tmp_path / "cmp.json")
    assert result.returncode == 1, result.stderr
    assert "| latency.warmed |" in result.stdout
    assert "slower" in result.stdout
    assert "**Gate: FAILED**" in result.stdout
    assert "Output check: not performed" in result.stdout
    assert (tmp_path / "cmp.json").exists()


def test_no_threshold_means_no_verdict_exit(tmp_path: Path) -> None:
    base = latency_report(BASE, "base").save(tmp_path / "base.json")
    cand = latency_report(SLOW, "cand").save(tmp_path / "cand.json")
    result = _run(base, cand)
    assert result.returncode == 0, result.stderr
    assert "Gate" not in result.stdout


def test_same_speed_passes_the_gate(tmp_path: Path) -> None:
    base = latency_report(BASE, "base").save(tmp_path / "base.json")
    result = _run(base, base, "--max-slowdown", "1.05")
    assert result.returncode == 0, result.stdout
    assert "no_difference" in result.stdout
    assert "**Gate: passed**" in result.stdout


def test_failed_check_in_saved_comparison_fails(tmp_path: Path) -> None:
    comparison = BenchmarkComparison(
        provenance=build_provenance(),
        check=CheckResult(performed=True, passed=False, detail="max abs diff 0.5", tolerance=0.001),
        deltas=[],
    ).save(tmp_path / "cmp.json")
    result = _run(comparison)
    assert result.returncode == 1
    assert "Output check: FAILED" in result.stdout
    assert "- the output check failed" in result.stdout


def test_bad_input_is_a_clear_error(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text("{nope")
    result = _run(broken, broken)
    assert result.returncode == 2
    assert "malformed JSON" in result.stderr
    assert str(broken) in result.stderr


def test_min_effect_that_cannot_apply_is_refused(tmp_path: Path) -> None:
    """--min-effect (and --max-slowdown) on analysis reports, or --min-effect on a saved
    comparison, would be ignored: refused with exit 2 and one line saying why."""
    import torch

    from torchscan_stages.analysis.crawl import crawl_module

    analysis = crawl_module(torch.nn.Linear(4, 4), (4,)).save(tmp_path / "a.json")
    saved = BenchmarkComparison(
        provenance=build_provenance(),
        check=CheckResult(performed=False, passed=None),
        deltas=[],
        settings={"min_effect": 0.05},
    ).save(tmp_path / "cmp.json")
    for args, said in (
        ((analysis, analysis, "--min-effect", "0.1"), "--min-effect applies to benchmark reports"),
        ((analysis, analysis, "--max-slowdown", "1.1"), "--max-slowdown applies to benchmark"),
        ((saved, "--min-effect", "0.1"), "judged with min_effect=0.05"),
    ):
        result = _run(*args)
        assert result.returncode == 2, result.stdout
        assert said in result.stderr
        assert result.stdout == ""
