"""read_history on synthetic git histories: values, statuses, segments, steps, the git calls.

The metrics files are written from the formulas beside each test (this tests how history
is read and fitted; test_history_e2e.py runs the real stages).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from synthetic import fast_repo, lock, md5, metrics

from torchscan_stages.history import GitError, detect_steps, gate_failures, read_history
from torchscan_stages.history.cache import median_interval
from torchscan_stages.report import report_text

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/latency_reports.py
from latency_reports import BASE, latency_report

SRC = "print('model')\n"


def _latency(i: int, level: float) -> float:
    """A level with a fixed +-1% wobble: 1 + 0.01 * ((7i mod 5) - 2) / 2."""
    return level * (1 + 0.01 * (((7 * i) % 5) - 2) / 2)


def _commit(i: int, level: float, **lock_args: object) -> dict[str, str]:
    return {"src.py": SRC, "dvc.lock": lock(SRC, **lock_args), **metrics(_latency(i, level), 4096)}  # type: ignore[arg-type]


def test_a_step_and_a_flat_metric(tmp_path: Path) -> None:
    # latency 10 ms for commits 0-5, 13 ms (x1.3) from commit 6; memory 4096 B throughout
    shas = fast_repo(tmp_path, [_commit(i, 0.010 if i < 6 else 0.013) for i in range(12)])
    history = read_history(tmp_path)
    assert [c.sha for c in history.commits] == shas
    metrics_ = {s.metric: s for s in history.series}
    assert sorted(metrics_) == [
        "latency/throughput_per_s",
        "latency/warmed_median_s",
        "memory/peak_cpu_tracked_tensors_bytes",
    ]
    median = metrics_["latency/warmed_median_s"]
    assert [p.status for p in median.points] == ["complete"] * 12
    assert median.points[0].value == pytest.approx(_latency(0, 0.010))
    steps = detect_steps(history)
    by_metric = {s.metric: s for s in steps}
    assert set(by_metric) == {"latency/warmed_median_s", "latency/throughput_per_s"}
    step = by_metric["latency/warmed_median_s"]
    assert (step.before, step.after, step.commits, step.single_commit) == (
        shas[5],
        shas[6],
        [shas[6]],
        True,
    )
    # geometric means of the wobbles: the wobble pattern repeats, ratio within 1% of 1.3
    assert step.ratio == pytest.approx(1.3, rel=0.01) and step.direction == "increased"
    assert step.worse and step.beyond_min_effect is None  # default: only reports
    throughput = by_metric["latency/throughput_per_s"]
    assert throughput.direction == "decreased" and throughput.worse  # fewer samples/s
    assert gate_failures(steps) == []  # no minimum effect set: no gate
    gated = detect_steps(history, min_effect=0.1)
    assert {s.metric for s in gate_failures(gated)} == set(by_metric)
    assert gate_failures(detect_steps(history, min_effect=0.5)) == []


def test_environment_and_threads_changes_are_breaks_never_joined(tmp_path: Path) -> None:
    # commits 0-3 env a; 4-7 env b with the same values x1.5; 8-11 threads 2
    commits = [_commit(i, 0.010, env="env-a") for i in range(4)]
    commits += [_commit(i, 0.015, env="env-b") for i in range(4, 8)]
    commits += [_commit(i, 0.015, env="env-b", threads=2) for i in range(8, 12)]
    fast_repo(tmp_path, commits)
    history = read_history(tmp_path)
    assert detect_steps(history) == []  # the x1.5 is across a break: not a step
    for series in history.series:
        assert [(g.start, g.stop) for g in series.segments] == [(0, 4), (4, 8), (8, 12)]
        assert series.segments[1].change == [f"env: {md5('env-a')[:12]} -> {md5('env-b')[:12]}"]
        assert series.segments[2].change == ["threads: 1 -> 2"]
        assert series.segments[0].key["model"] == "m@1"


def test_stale_and_missing_points_are_unavailable(tmp_path: Path) -> None:
    first = {"src.py": SRC, "dvc.lock": lock(SRC)}  # no metrics yet
    commits = [first] + [_commit(i, 0.010) for i in range(1, 4)]
    commits.append({"src.py": "print('changed')\n"})  # code changed, not measured again
    fast_repo(tmp_path, commits)
    everything = read_history(tmp_path, whole=True)  # the first commit carries no results
    median = next(s for s in everything.series if s.name == "warmed_median_s")
    statuses = [(p.status, p.note) for p in median.points]
    assert statuses[0] == ("unavailable", "no metrics/latency.json at this commit")
    assert [s for s, _ in statuses[1:4]] == ["complete"] * 3
    assert statuses[4] == (
        "unavailable",
        "not measured at this commit: dvc.lock's src.py is not this commit's",
    )


def test_reports_from_the_dvc_cache_give_intervals(tmp_path: Path) -> None:
    # one real latency report (20 synthetic blocks, 10.00-10.04 ms) stored in the DVC cache
    text = report_text(latency_report(list(BASE), "cached"))
    digest = md5(text)
    cache = tmp_path / ".dvc" / "cache" / "files" / "md5" / digest[:2]
    cache.mkdir(parents=True)
    (cache / digest[2:]).write_text(text)
    commits = [_commit(i, 0.010, outs={"latency": digest}) for i in range(3)]
    fast_repo(tmp_path, commits)
    history = read_history(tmp_path)
    assert history.reports_read == 1  # one md5, read once for three commits
    point = next(s for s in history.series if s.name == "warmed_median_s").points[0]
    # 20 blocks: ranks floor(10 - 1.96*sqrt(20)/2) = 5 and ceil(10 + 4.38) = 15 (0-based)
    assert (
        (point.low, point.high)
        == median_interval(list(BASE))
        == (sorted(BASE)[5], sorted(BASE)[15])
    )
    assert "order-statistic" in (point.interval or "")
    flat = next(
        s for s in read_history(tmp_path, reports=False).series if s.name == "warmed_median_s"
    )
    assert flat.points[0].low is None  # no warmed_iqr_s in these flat metrics


def test_iqr_band_from_flat_metrics(tmp_path: Path) -> None:
    files = {"src.py": SRC, "dvc.lock": lock(SRC), **metrics(0.010, 4096, iqr=0.0004)}
    fast_repo(tmp_path, [files])
    point = next(s for s in read_history(tmp_path).series if s.name == "warmed_median_s").points[0]
    assert (point.low, point.high) == pytest.approx((0.0098, 0.0102))  # 10 ms -+ 0.4 ms / 2


def test_range_limit_and_errors(tmp_path: Path) -> None:
    shas = fast_repo(tmp_path, [_commit(i, 0.010) for i in range(8)])
    assert [c.sha for c in read_history(tmp_path, limit=3).commits] == shas[-3:]
    assert [c.sha for c in read_history(tmp_path, "HEAD~2..HEAD").commits] == shas[-2:]
    with pytest.raises(GitError, match=r"no-such-rev"):
        read_history(tmp_path, "no-such-rev")
    with pytest.raises(ValueError, match="limit must be an int >= 1"):
        read_history(tmp_path, limit=0)


def test_git_is_asked_a_fixed_number_of_times(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No checkout or process per commit: 40 commits cost the same git calls as 4."""
    calls: list[list[str]] = []
    real = subprocess.run

    def counting(cmd: list[str], *args: object, **kwargs: object) -> object:
        calls.append(list(cmd))
        return real(cmd, *args, **kwargs)  # type: ignore[call-overload]

    few, many = tmp_path / "few", tmp_path / "many"
    fast_repo(few, [_commit(i, 0.010) for i in range(4)])
    fast_repo(many, [_commit(i, 0.010) for i in range(40)])
    monkeypatch.setattr(subprocess, "run", counting)
    read_history(few)
    count_few, calls[:] = len(calls), []
    read_history(many)
    # log; then names + contents of the metrics trees, of the files, of the dependencies
    assert len(calls) == count_few == 7
    assert all(c[:2] in (["git", "log"], ["git", "cat-file"]) for c in calls)


def test_commits_before_the_first_measurement_join_the_first_segment(tmp_path: Path) -> None:
    # two commits without metrics, then four measured ones: one segment, no break
    bare = {"src.py": SRC}
    fast_repo(tmp_path, [bare, bare] + [_commit(i, 0.010) for i in range(2, 6)])
    assert len(read_history(tmp_path).commits) == 4  # by default: the commits with results
    for series in read_history(tmp_path, "HEAD").series:  # a range names every commit
        assert [(g.start, g.stop) for g in series.segments] == [(0, 6)]
        assert series.segments[0].key["env"] == md5("env-a")[:12]


def test_cli_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from torchscan_stages.commands.history import main

    assert main(["--repo", str(tmp_path)]) == 2  # not a git repository
    assert "is not a git repository" in capsys.readouterr().err
    fast_repo(tmp_path, [_commit(i, 0.010 if i < 6 else 0.013) for i in range(12)])
    assert main(["--repo", str(tmp_path), "--limit", "0"]) == 2
    assert main(["--repo", str(tmp_path), "--bisect", "HEAD~3", "HEAD"]) == 2  # no --metric
    assert main(["--repo", str(tmp_path), "--json", str(tmp_path)]) == 2  # a directory
    capsys.readouterr()
    assert main(["--repo", str(tmp_path)]) == 0  # steps are only reported
    out = capsys.readouterr().out
    assert "latency/warmed_median_s: increased x1.3" in out and "in " in out
    assert main(["--repo", str(tmp_path), "--min-effect", "0.1"]) == 1  # x1.3 beyond 10%
    assert "gate: 2 confident step(s)" in capsys.readouterr().err


def test_the_default_range_is_the_commits_that_carry_results(tmp_path: Path) -> None:
    # a clone of a project (60 commits without results), then the user's 4 results commits
    bare = {"src.py": SRC}
    shas = fast_repo(tmp_path, [bare] * 60 + [_commit(i, 0.010) for i in range(4)])
    history = read_history(tmp_path)
    assert [c.sha for c in history.commits] == shas[60:]
    assert history.range_note is not None and "60 older commit(s) without results" in (
        history.range_note
    )
    assert len(read_history(tmp_path, whole=True).commits) == 64
    assert len(read_history(tmp_path, "HEAD~9..HEAD").commits) == 9  # a range is a range


def test_without_results_the_last_50_commits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from torchscan_stages.commands.history import main

    shas = fast_repo(tmp_path, [{"src.py": f"x = {i}\n"} for i in range(60)])
    history = read_history(tmp_path)
    assert [c.sha for c in history.commits] == shas[10:] and history.series == []
    assert main(["--repo", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "range: no commit carries results (metrics/*.json); the last 50" in out
    assert main(["--repo", str(tmp_path), "--all"]) == 0
    assert "60 commits" in capsys.readouterr().out
