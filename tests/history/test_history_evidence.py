"""A step is confident only on clean evidence: the newcomer's four commits, and their twin.

The newcomer's sequence: four commits of results; the first was measured with
one block, stopped by the timing backstop on a loaded host (330 ms), the other three at a
quieter moment (26.5 ms); the code had not changed speed. Its compare ratios were
``inconclusive``. The evidence sidecars (``metrics/<stage>.evidence.json``, written here
as the pipeline writes them) carry those warnings: history must find no confident step and
call the drop "suspect: needs a quiet rerun", naming commit 0 and the command. The twin
sequence has clean points and a real x1.3 slowdown at commit 2: one confident step.
"""

from __future__ import annotations

import random
import subprocess
from pathlib import Path
from typing import Any

import pytest
from synthetic import fast_repo, lock, metrics, sidecar

from torchscan_stages.commands.history import main
from torchscan_stages.history import (
    Commit,
    History,
    Point,
    Segment,
    Series,
    detect_steps,
    gate_failures,
    history_document,
    read_history,
)
from torchscan_stages.render import render_report

SRC = "x = 1\n"
MEDIAN = "latency/warmed_median_s"
RATIO = "compare/latency_warmed_ratio"
WARNED = ["too_few_blocks", "timing_backstop", "loaded_host"]


def _compare(ratio: float, verdict: str, interval: tuple[float, float] | None) -> dict[str, str]:
    entry: dict[str, Any] = {"status": "complete", "verdict": verdict, "interval": interval}
    if verdict == "inconclusive":
        entry["warnings"] = ["host_too_busy"]
        entry["note"] = "2 rounds are too few for an interval"
    return {
        "metrics/compare.json": f'{{"latency_warmed_ratio": {ratio}}}\n',
        "metrics/compare.evidence.json": sidecar("compare", {"latency_warmed_ratio": entry}),
    }


def _commit(
    median_s: float,
    iqr: float,
    *,
    warnings: list[str] | None = None,
    compare: dict[str, str] | None = None,
    evidence: bool = True,
) -> dict[str, str]:
    files = {"src.py": SRC, "dvc.lock": lock(SRC)}
    files.update(metrics(median_s, 4096, iqr, warnings=warnings, evidence=evidence))
    return {**files, **(compare or {})}  # fmt: skip


def newcomer(warned_first: bool) -> list[dict[str, str]]:
    """Commit 0: 330 ms from 1 block (IQR 0) on a loaded host, or (the twin) a clean
    26.5 ms; commits 1-3: 26.5 ms, and in the twin a real x1.3 (34.45 ms) from commit 2."""
    if warned_first:
        medians = [0.330, 0.0265, 0.0266, 0.0264]
        ratios = [(1.41, "inconclusive", None), (1.40, "inconclusive", None),
                  (1.407, "slower", (1.379, 1.435)), (1.41, "slower", (1.38, 1.44))]  # fmt: skip
    else:
        medians = [0.0265, 0.0266, 0.0265 * 1.3, 0.0266 * 1.3]
        ratios = [(1.407, "slower", (1.379, 1.435))] * 4
    return [
        _commit(m, 0.0 if warned_first and i == 0 else 0.0004,
                warnings=WARNED if warned_first and i == 0 else None,
                compare=_compare(*ratios[i]))
        for i, m in enumerate(medians)
    ]  # fmt: skip


@pytest.fixture(scope="module")
def warned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    root = tmp_path_factory.mktemp("newcomer")
    return root, fast_repo(root, newcomer(warned_first=True))


def test_the_newcomers_sequence_gives_no_confident_step(warned: tuple[Path, list[str]]) -> None:
    root, shas = warned
    history = read_history(root)
    steps = detect_steps(history, min_effect=0.1)
    assert [s for s in steps if not s.suspect] == [] and gate_failures(steps) == []
    median = next(s for s in history.series if s.metric == MEDIAN)
    first = median.points[0]
    assert (first.status, first.clean, first.warnings) == ("complete", False, WARNED)
    assert all(p.clean for p in median.points[1:])
    # the drop 330 -> 26.5 ms (x0.08) is suspect: it rests on commit 0 alone
    (drop,) = median.steps
    assert drop.suspect and drop.direction == "decreased" and drop.rests_on == [shas[0]]
    assert drop.ratio == pytest.approx(0.0265 / 0.330, rel=0.01)
    assert drop.warnings == WARNED and drop.beyond_min_effect is None
    assert drop.rerun is not None and f"for c in {shas[0][:12]};" in drop.rerun
    assert "dvc repro -q --force latency" in drop.rerun
    assert f"dvc cache dir --local {root.resolve() / '.dvc' / 'cache'} " in drop.rerun
    parsed = subprocess.run(["bash", "-n"], input=drop.rerun, text=True, check=False)
    assert parsed.returncode == 0  # a shell line as printed
    # the inconclusive compare points carry no interval; the confident ones do
    ratio = next(s for s in history.series if s.metric == RATIO)
    assert [(p.low, p.high) for p in ratio.points] == [
        (None, None), (None, None), (1.379, 1.435), (1.38, 1.44)
    ]  # fmt: skip
    assert [p.clean for p in ratio.points] == [False, False, True, True]
    assert ratio.points[0].warnings == ["host_too_busy", "inconclusive"]
    assert all(s.suspect for s in ratio.steps)


def test_the_cli_says_suspect_and_does_not_gate(
    warned: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    root, shas = warned
    assert main(["--repo", str(root), "--min-effect", "0.1"]) == 0
    out = capsys.readouterr().out
    assert "0 confident step(s)" in out
    assert f"suspect: needs a quiet rerun: {MEDIAN}: decreased x0.08" in out
    assert f"rests on weak point(s) at {shas[0][:10]} (too_few_blocks" in out
    assert "rerun: cd " in out


def test_the_clean_twin_with_a_real_1_3x_slowdown_gives_one_step(tmp_path: Path) -> None:
    shas = fast_repo(tmp_path, newcomer(warned_first=False))
    history = read_history(tmp_path)
    steps = detect_steps(history, min_effect=0.1)
    by_metric = {s.metric: s for s in steps}
    assert set(by_metric) == {MEDIAN, "latency/throughput_per_s"}  # ratios flat: no step
    step = by_metric[MEDIAN]
    assert not step.suspect and (step.before, step.after) == (shas[1], shas[2])
    # geometric means: sqrt(26.5 * 26.6) -> 1.3 * the same: exactly x1.3
    assert step.ratio == pytest.approx(1.3) and step.ci_low > 1.1
    assert {s.metric for s in gate_failures(steps)} == set(by_metric)


def test_results_without_evidence_are_weak_and_said_so(tmp_path: Path) -> None:
    # 12 commits, a real x1.3 at commit 6, but written before sidecars: suspect, not gated
    commits = [_commit(0.010 if i < 6 else 0.013, 0.0002, evidence=False) for i in range(12)]
    shas = fast_repo(tmp_path, commits)
    history = read_history(tmp_path)
    point = next(s for s in history.series if s.metric == MEDIAN).points[0]
    assert point.warnings == ["evidence_not_recorded"] and not point.clean
    assert f"no metrics/latency.evidence.json at {shas[0][:10]}" in (point.evidence or "")
    steps = detect_steps(history, min_effect=0.1)
    assert steps and all(s.suspect for s in steps) and gate_failures(steps) == []
    assert steps[0].warnings == ["evidence_not_recorded"] and len(steps[0].rests_on) == 12
    # the rerun measures the two commits that decide the step, not all twelve
    assert f"for c in {shas[5][:12]} {shas[6][:12]};" in (steps[0].rerun or "")


def test_a_warned_spike_beside_a_real_step(tmp_path: Path) -> None:
    # clean 10 ms (0-5) and 13 ms (6-11); commit 3 warned at 30 ms: the x1.3 stays
    # confident, the spike is two suspect steps resting on commit 3 only
    commits = [_commit(0.010 if i < 6 else 0.013, 0.0002) for i in range(12)]
    commits[3] = _commit(0.030, 0.0, warnings=["loaded_host"])
    shas = fast_repo(tmp_path, commits)
    history = read_history(tmp_path)
    detect_steps(history)
    median = next(s for s in history.series if s.metric == MEDIAN)
    confident = [s for s in median.steps if not s.suspect]
    assert [(s.before, s.after) for s in confident] == [(shas[5], shas[6])]
    assert confident[0].ratio == pytest.approx(1.3)
    suspects = [s for s in median.steps if s.suspect]
    assert [s.direction for s in suspects] == ["increased", "decreased"]
    assert all(s.rests_on == [shas[3]] for s in suspects)


def test_the_page_draws_weak_points_hollow_with_their_warnings(
    warned: tuple[Path, list[str]],
) -> None:
    history = read_history(warned[0])
    document = history_document(history, detect_steps(history))
    median = next(s for s in document.series if s.metric == MEDIAN)
    assert median.points[0].warnings == WARNED and not median.points[0].clean
    assert median.steps[0].suspect and median.steps[0].rerun
    page = render_report(document)
    assert page.count('class="mk s0 hollow"') >= 3  # the warned median, throughput, ratio
    assert "too_few_blocks, timing_backstop, loaded_host" in page
    assert "suspect: needs a quiet rerun" in page


def _synthetic_history(values: list[float], weak: set[int]) -> History:
    """One series of ``values`` at commits 0..n-1 in one segment; ``weak`` points warned."""
    commits = [Commit(f"{i:040x}", (), 1_700_000_000 + i, f"c{i}") for i in range(len(values))]
    points = [
        Point(c.sha, i, "complete", v, clean=i not in weak,
              warnings=["loaded_host"] if i in weak else [])
        for i, (c, v) in enumerate(zip(commits, values, strict=True))
    ]  # fmt: skip
    series = Series(MEDIAN, "latency", "warmed_median_s", "s", points)
    series.segments = [Segment(0, len(points), {"env": "a"})]
    return History("/repo", "HEAD", commits, [series])


@pytest.mark.parametrize("seed", range(10))
def test_weak_outliers_never_make_a_confident_step_nor_hide_a_real_one(seed: int) -> None:
    # 40 points, 5% noise, a true x1.3 from point 20; 8 random points measured on a loaded
    # host read 2-10x slow. Confident: exactly the x1.3, within 10%; every suspect step
    # rests on warned points only.
    rng = random.Random(seed)
    values = [(100.0 if i < 20 else 130.0) * (1 + 0.05 * rng.gauss(0, 1)) for i in range(40)]
    weak = set(rng.sample(range(40), 8))
    for i in weak:
        values[i] *= rng.uniform(2.0, 10.0)
    history = _synthetic_history(values, weak)
    steps = detect_steps(history)
    confident = [s for s in steps if not s.suspect]
    assert len(confident) == 1 and 1.17 < confident[0].ratio < 1.43, confident
    shas = [c.sha for c in history.commits]
    assert shas[20] in confident[0].commits  # the range holds the planted commit
    weak_shas = {shas[i] for i in weak}
    assert all(s.rests_on and set(s.rests_on) <= weak_shas for s in steps if s.suspect)
