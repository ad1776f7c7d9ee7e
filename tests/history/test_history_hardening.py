"""history on the inputs an outsider gives it: every case a right result or one line.

One synthetic repository (tests/history/synthetic.py) holds every damaged past metrics file
at a commit of its own, and commit subjects with the characters that once split a
``git log`` line; the other commits are a flat 10 ms / 4,096 B. Each damaged value makes
its own point ``unavailable`` with a note naming the file and the commit; nothing else
changes. The CLI cases check the exit code, the one line, and that no file outside the
named outputs is written.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from synthetic import fast_repo, lock, metrics

from torchscan_stages.commands.history import main
from torchscan_stages.history import detect_steps, history_document, read_history
from torchscan_stages.history.bisect import MetricNameError, bisect_step
from torchscan_stages.history.gitread import RevisionError
from torchscan_stages.report import load_report
from torchscan_stages.report.history import HistoryReport

SRC = "x = 1\n"
MEDIAN = "latency/warmed_median_s"
PEAK = "memory/peak_cpu_tracked_tensors_bytes"
DEEP = "[" * 100_000 + "]" * 100_000
# commit -> (metrics/latency.json text, the words its median's note must hold)
DAMAGED_LATENCY: dict[int, tuple[str, str]] = {
    3: ("{nope", "malformed JSON"),
    4: ('"a string"', 'the top level is a str ("a string"), not an object'),
    5: ("[1, 2]", "the top level is a list of 2, not an object"),
    6: ("true", "the top level is true"),
    7: ('{"warmed_median_s": NaN, "throughput_per_s": 800}', "NaN is not a finite number"),
    8: ('{"warmed_median_s": Infinity, "throughput_per_s": 800}', "Infinity"),
    9: ('{"warmed_median_s": 1e400, "throughput_per_s": 800}', "1e400 (beyond a float)"),
    10: ('{"warmed_median_s": 1' + "0" * 4999 + ', "throughput_per_s": 800}', "5000-digit"),
    12: ('{"warmed_median_s": 0.01, "x": ' + DEEP + "}", "nested too deeply"),
    13: ('{"warmed_median_s": "fast", "throughput_per_s": 800}', "a str"),
}
NEGATIVE_PEAK = 11  # memory.json says -4096 bytes
BAD_SIDECAR = 14  # metrics/latency.evidence.json is "{nope"
BAD_LOCK = 17  # dvc.lock's latency entry lists deps: 5 (params.yaml gives the key instead)
SUBJECTS = {1: "a\u2028b", 2: "form\ffeed", 15: "next\u0085line", 16: "rec\x1esep\x1funit"}
COMMITS = 18


def _files(i: int) -> dict[str, str]:
    files = {"src.py": SRC, "dvc.lock": lock(SRC), **metrics(0.010, 4096)}
    if i in DAMAGED_LATENCY:
        files["metrics/latency.json"] = DAMAGED_LATENCY[i][0]
    if i == NEGATIVE_PEAK:
        files["metrics/memory.json"] = '{"peak_cpu_tracked_tensors_bytes": -4096}'
    if i == BAD_SIDECAR:
        files["metrics/latency.evidence.json"] = "{nope"
    if i == BAD_LOCK:
        files["dvc.lock"] = "stages: {latency: {deps: 5, outs: x, params: [1]}}\n"
    return files


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    root = tmp_path_factory.mktemp("outsider") / "repo"
    return root, fast_repo(root, [_files(i) for i in range(COMMITS)], SUBJECTS)


def _series(history: Any, metric: str) -> Any:
    return next(s for s in history.series if s.metric == metric)


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if ".git" not in p.parts}


def test_damaged_values_are_unavailable_points_naming_file_and_commit(
    repo: tuple[Path, list[str]],
) -> None:
    root, shas = repo
    history = read_history(root)
    assert [c.subject for c in history.commits][1:3] == [SUBJECTS[1], SUBJECTS[2]]
    assert history.commits[15].subject == SUBJECTS[15]
    assert history.commits[16].subject == SUBJECTS[16]
    median = _series(history, MEDIAN)
    for i, (_, words) in DAMAGED_LATENCY.items():
        point = median.points[i]
        assert point.status == "unavailable" and point.value is None, (i, point)
        assert f"metrics/latency.json at {shas[i][:10]}" in point.note and words in point.note
    # every other commit: complete; the memory series is untouched by latency's damage
    fine = [p for i, p in enumerate(median.points) if i not in DAMAGED_LATENCY]
    assert all(p.status == "complete" and p.value == 0.010 for p in fine)
    peak = _series(history, PEAK)
    assert [p.status for i, p in enumerate(peak.points) if i != NEGATIVE_PEAK] == ["complete"] * (
        COMMITS - 1
    )
    negative = peak.points[NEGATIVE_PEAK]
    assert negative.status == "unavailable" and "-4096 is negative" in negative.note
    # throughput beside a NaN median is still read (one bad value spoils its key only)
    throughput = _series(history, "latency/throughput_per_s")
    assert throughput.points[7].status == "complete" and throughput.points[7].value == 800
    # the damaged sidecar: the value stands, weak, its evidence unreadable, named
    weak = median.points[BAD_SIDECAR]
    assert weak.status == "complete" and not weak.clean
    assert weak.warnings == ["evidence_unreadable"]
    assert f"metrics/latency.evidence.json at {shas[BAD_SIDECAR][:10]}" in weak.evidence
    # the damaged dvc.lock: its key comes from (absent) params.yaml, so a new segment
    assert [g.start for g in median.segments] == [0, BAD_LOCK]
    assert median.segments[1].key["env"] == "?"


def test_the_document_is_strict_json(repo: tuple[Path, list[str]], tmp_path: Path) -> None:
    out = tmp_path / "h.json"
    before = _tree(repo[0])
    assert main(["--repo", str(repo[0]), "--json", str(out)]) == 0
    assert _tree(tmp_path) == {"h.json"} and _tree(repo[0]) == before  # nothing else written

    def refuse(constant: str) -> None:
        raise AssertionError(f"bare {constant} in the JSON")

    document = json.loads(out.read_text(), parse_constant=refuse)
    assert document["kind"] == "history" and len(document["commits"]) == COMMITS
    loaded = load_report(out)  # a report kind like any other: read back, validated
    assert isinstance(loaded, HistoryReport) and len(loaded.series) == 3
    history = read_history(repo[0])
    again = history_document(history, detect_steps(history))
    assert (loaded.commits, loaded.series) == (again.commits, again.series)


def test_option_injection_is_refused(
    repo: tuple[Path, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, shas = repo
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    before = _tree(tmp_path) | _tree(root)
    assert main(["--repo", str(root), "--", f"--output={victim}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "begins with '-'" in err and "--output=" in err
    assert victim.read_text() == "keep me" and _tree(tmp_path) | _tree(root) == before
    with pytest.raises(RevisionError, match="begins with '-'"):
        read_history(root, "--all")
    with pytest.raises(RevisionError, match="begins with '-'"):
        bisect_step(root, f"--output={victim}", shas[-1], MEDIAN, measure=lambda c: None)
    assert victim.read_text() == "keep me"


def test_exit_codes_name_what_was_wrong(
    repo: tuple[Path, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, shas = repo
    same = tmp_path / "out.x"
    cases = [
        (["--repo", "/no/such/dir"], "'/no/such/dir': no such directory"),
        (["--repo", str(root), "no-such-rev"], "unknown revision or range 'no-such-rev'"),
        (["--repo", str(root), "--json", str(same), "--html", str(same)], "the same file"),
        (["--repo", str(root), "--metric", "latency/nope"], "--metric 'latency/nope'"),
        (["--repo", str(root), "--bisect", shas[1], shas[2], "--metric", "latency/nope"],
         "has no 'nope'"),
        (["--repo", str(root), "--bisect", shas[1], shas[2], "--metric", "nope"],
         "--metric 'nope'"),
        (["--repo", str(root), "--max-file-mb", "0"], "--max-file-mb"),
        (["--repo", str(root), "--json", str(tmp_path / "f" / "x.json")], None),
    ]  # fmt: skip
    (tmp_path / "f").write_text("a file where a folder should be")
    before = _tree(tmp_path) | _tree(root)
    for argv, words in cases:
        code = main(argv)
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1, (argv, code, err)
        assert "git is not installed" not in err
        assert words is None or words in err, (argv, err)
    assert _tree(tmp_path) | _tree(root) == before  # nothing written, no .tmp left
    with pytest.raises(MetricNameError):
        bisect_step(root, shas[1], shas[2], "latency/nope", measure=lambda c: None)


def test_metric_filter_and_size_cap(
    repo: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    root = repo[0]
    assert main(["--repo", str(root), "--metric", PEAK]) == 0
    assert "1 series" in capsys.readouterr().out
    # a 1 KiB cap: metrics/latency.json of commit 10 (5,000 digits) is not even read
    capped = _series(read_history(root, max_file_mb=1 / 1024), MEDIAN).points[10]
    assert capped.status == "unavailable" and "not read: 5" in capped.note
    assert "over the 0.000976562 MiB cap" in capped.note and "--max-file-mb" in capped.note


def _two_million_keys() -> str:
    """``{"aaaa":1,"aaab":1,...}``: 2,000,000 distinct 4-letter keys, 18 MB."""
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN"  # 40**4 = 2,560,000 >= 2,000,000
    keys = itertools.islice(itertools.product(letters, repeat=4), 2_000_000)
    return '{"' + '":1,"'.join(map("".join, keys)) + '":1}'


def test_a_two_million_key_file_is_never_read(tmp_path: Path) -> None:
    """The 2,000,000-key file (18 MB) is over the 4 MiB cap: git states its size, the
    history never reads it. Measured: the Python heap's peak stays under 20 MB
    (reading it whole once grew a process past 5 GB)."""
    shas = fast_repo(tmp_path, [_files(0), _files(1)])
    (tmp_path / "metrics" / "latency.json").write_text(_two_million_keys())
    git = ["git", "-c", "core.compression=0", "-c", "user.name=t", "-c", "user.email=t@l"]
    subprocess.run([*git, "commit", "-qam", "huge"], cwd=tmp_path, check=True)
    tracemalloc.start()
    try:
        history = read_history(tmp_path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 20 * 2**20, peak
    point = _series(history, MEDIAN).points[2]
    assert point.status == "unavailable" and "not read: 18000001 bytes" in point.note
    assert f"metrics/latency.json at {history.commits[2].sha[:10]}" in point.note
    assert [c.sha for c in history.commits[:2]] == shas
    assert len(history.series) == 3  # no series of aaaa .. dGNN
    assert detect_steps(history) == []


def test_a_file_name_with_a_line_break_is_skipped(tmp_path: Path) -> None:
    files = {**_files(0), "metrics/odd\nname.json": '{"a_s": 1}'}
    fast_repo(tmp_path, [files, _files(1)])
    assert {s.metric for s in read_history(tmp_path).series} == {
        MEDIAN, PEAK, "latency/throughput_per_s"
    }  # fmt: skip
