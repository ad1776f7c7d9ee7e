"""bisect_step with injected measurements: saved latency reports from synthetic blocks.

No clock is read: each probed commit's report is built from known block times, so the
verdicts come from compare_benchmarks' interval logic on exactly those numbers. The real
worktree + DVC path is tested in test_history_e2e.py (peak memory, a real stage).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from synthetic import fast_repo, lock, metrics

from torchscan_stages.compare.deltas import Judge
from torchscan_stages.history.bisect import BisectError, bisect_step, verdict

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/latency_reports.py
from latency_reports import BASE, latency_report

SRC = "x = 1\n"
METRIC = "latency/warmed_median_s"
SLOW = [t * 1.3 for t in BASE]  # the planted 1.3x: 13.00-13.05 ms
NOISY = [0.005 + 0.015 * ((i * 0.618) % 1.0) for i in range(20)]  # spread over 5-20 ms


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, list[str]]:
    files = {"src.py": SRC, "dvc.lock": lock(SRC), **metrics(0.010, 4096)}
    return tmp_path, fast_repo(tmp_path, [dict(files, note=str(i)) for i in range(10)])


def _measure(shas: list[str], blocks_at: dict[int, list[float]], calls: list[str]) -> Any:
    def measure(commit: str) -> Any:
        calls.append(commit)
        index = shas.index(commit)
        blocks = next((b for start, b in sorted(blocks_at.items(), reverse=True)
                       if index >= start), BASE)  # fmt: skip
        return latency_report(list(blocks), commit[:8])

    return measure


def test_a_1_3x_latency_step_is_named(repo: tuple[Path, list[str]]) -> None:
    root, shas = repo
    calls: list[str] = []
    # commits 0-5: 10 ms blocks; from commit 6: the same blocks x1.3
    result = bisect_step(root, shas[1], shas[9], METRIC, measure=_measure(shas, {6: SLOW}, calls))
    assert result.verdict == "found" and result.commit == shas[6], result.reason
    assert result.direction == "slower" and result.good == shas[5]
    # binary search over 8 commits after GOOD: 3 probes (5, 7, 6), plus GOOD and BAD
    assert [p.commit for p in result.probes] == [shas[5], shas[7], shas[6]]
    assert len(calls) == 5 and len(set(calls)) == 5  # each commit measured once
    assert result.probes[-1].vs_good == "slower" and result.probes[-1].vs_bad == "no_difference"


def test_noise_that_cannot_separate_is_inconclusive(repo: tuple[Path, list[str]]) -> None:
    root, shas = repo
    calls: list[str] = []
    # the first probe (commit 5) has blocks spread over 5-20 ms: like neither side
    measure = _measure(shas, {5: NOISY, 6: SLOW}, calls)
    result = bisect_step(root, shas[1], shas[9], METRIC, measure=measure)
    assert result.verdict == "inconclusive" and result.commit is None
    assert (result.good, result.bad) == (shas[1], shas[9])  # the range is not narrowed
    assert "neither like GOOD nor like BAD" in result.reason


def test_good_and_bad_alike_blame_nothing(repo: tuple[Path, list[str]]) -> None:
    root, shas = repo
    result = bisect_step(root, shas[1], shas[9], METRIC, measure=_measure(shas, {}, []))
    assert result.verdict == "inconclusive" and "not told apart (no_difference)" in result.reason


def test_verdict_and_errors(repo: tuple[Path, list[str]]) -> None:
    root, shas = repo
    base, slow = latency_report(list(BASE), "a"), latency_report(SLOW, "b")
    judged, ratio = verdict(base, slow, "warmed_median_s", Judge(min_effect=0.05))
    assert judged == "slower" and ratio == pytest.approx(1.3, rel=0.01)
    # the judge decides: a 1.3x step is within a 40% minimum effect (its interval of about
    # [1.29, 1.31] lies inside 1 +- 0.4), so GOOD and BAD are alike and nothing is blamed
    wide = bisect_step(root, shas[1], shas[9], METRIC, judge={"min_effect": 0.4},
                       measure=_measure(shas, {6: SLOW}, []))  # fmt: skip
    assert wide.verdict == "inconclusive" and "(no_difference)" in wide.reason
    with pytest.raises(TypeError, match=r"bisect_step\(min_effect=\.\.\.\) moved into judge="):
        bisect_step(root, shas[1], shas[9], METRIC, min_effect=0.1)  # type: ignore[call-arg]
    with pytest.raises(BisectError, match="found in none of metrics"):
        bisect_step(root, shas[1], shas[9], "no_such_metric", measure=_measure(shas, {}, []))


def test_a_min_effect_below_the_interval_floor_is_one_line(
    repo: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    from torchscan_stages.commands.history import main

    root, shas = repo
    argv = ["--repo", str(root), "--bisect", shas[1], shas[9], "--metric", METRIC]
    assert main([*argv, "--min-effect", "0.001"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(
        "history: error: --min-effect 0.001: ci_floor must be in [0, min_effect)"
    )
