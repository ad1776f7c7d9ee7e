"""End to end on a generated repository of 32 commits whose metrics come from real stages.

``planted_repo.build`` runs ``dvc repro`` (env, crawl, memory: real child processes and
torch) wherever the planted model changes; the tests read that history back from git,
find the planted steps in the right commit ranges, see the environment break, the partial
metric and the stale commits, gate on the steps, and bisect the stale range to the
planted commit by running the memory stage in a temporary worktree.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import planted_repo as planted
import pytest

from torchscan_stages.history import detect_steps, read_history
from torchscan_stages.history.bisect import bisect_step

# The module fixture's six `dvc repro` runs count against its first test's timeout: 128 s
# idle, over the 600 s default at a load average of 22 (2026-12-01); each child command
# keeps its own 900 s limit (planted_repo.sh), so a hang still fails.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

MEMORY = "memory/peak_cpu_tracked_tensors_bytes"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    repo = tmp_path_factory.mktemp("history") / "repo"
    return repo, planted.build(repo)


def _series(history: object, metric: str) -> object:
    return next(s for s in history.series if s.metric == metric)  # type: ignore[attr-defined]


def test_planted_steps_are_found_in_their_commit_ranges(built: tuple[Path, list[str]]) -> None:
    repo, shas = built
    history = read_history(repo)
    assert [c.sha for c in history.commits] == shas
    detect_steps(history)
    memory = _series(history, MEMORY)
    # the stages commit evidence sidecars (metrics/memory.evidence.json): exact counts with
    # no validity warning are clean points, so the planted steps are confident, not suspect
    complete = [p for p in memory.points if p.status == "complete"]  # type: ignore[attr-defined]
    assert complete and all(p.clean for p in complete), [p.evidence for p in complete][:1]
    assert not any(s.suspect for s in memory.steps)  # type: ignore[attr-defined]
    # 2*16*50*4 = 6400 B -> 2*16*65*4 = 8320 B (x1.3) -> 2*16*78*4 = 9984 B (x1.2)
    assert memory.points[0].value == planted.expected_peak(50) == 6400  # type: ignore[attr-defined]
    steps = [(s.before, s.after, s.single_commit, s.ratio) for s in memory.steps]  # type: ignore[attr-defined]
    assert steps == [
        (shas[5], shas[6], True, pytest.approx(8320 / 6400)),
        (shas[11], shas[14], False, pytest.approx(9984 / 8320)),
    ]
    assert memory.steps[1].commits == shas[12:15]  # type: ignore[attr-defined]
    params = _series(history, "crawl/parameters")
    # 64w + w + 10w + 10 parameters: 3760 (w=50), 4885 (65), 5860 (78)
    assert [p.value for p in params.points[:1]] == [planted.expected_parameters(50)]  # type: ignore[attr-defined]
    assert [s.ratio for s in params.steps] == [  # type: ignore[attr-defined]
        pytest.approx(4885 / 3760),
        pytest.approx(5860 / 4885),
    ]
    # no step anywhere else: every series' steps lie in the two planted ranges
    for series in history.series:
        for step in series.steps:
            assert (step.before, step.after) in {(shas[5], shas[6]), (shas[11], shas[14])}, step


def test_environment_change_is_a_break_and_stale_commits_are_not_points(
    built: tuple[Path, list[str]],
) -> None:
    history = read_history(built[0])
    for series in history.series:
        starts = [g.start for g in series.segments]
        assert starts == [0, planted.ENV_CHANGE], series.metric
        assert any(c.startswith("env: ") for c in series.segments[1].change), series.metric
    memory = _series(history, MEMORY)
    for index in (12, 13):  # planted.py changed, no repro: dvc.lock does not match
        point = memory.points[index]  # type: ignore[attr-defined]
        assert point.status == "unavailable" and "not measured at this commit" in point.note


def test_partial_metric_in_the_middle(built: tuple[Path, list[str]]) -> None:
    repo = built[0]
    history = read_history(repo)
    flops = _series(history, "crawl/module_flops")
    before, partial, after = flops.points[18:21]  # type: ignore[attr-defined]
    assert (before.status, partial.status, after.status) == ("complete", "partial", "complete")
    # the lower bound misses Scratch's own work: below the complete total on either side
    assert partial.value < before.value == after.value
    assert "unsupported_module" in partial.note
    flat_only = _series(read_history(repo, reports=False), "crawl/module_flops")
    assert flat_only.points[19].status == "unavailable"  # type: ignore[attr-defined]


def _cli(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "torchscan_stages", "history", "--repo", str(repo), *args],
        capture_output=True, text=True, timeout=600, check=False, env=planted.child_env()
        | {"PYTHONPATH": str(planted.ROOT)},
    )  # fmt: skip


def test_cli_writes_report_and_page_and_gates(
    built: tuple[Path, list[str]], tmp_path: Path
) -> None:
    repo, shas = built
    out_json, out_html = tmp_path / "history.json", tmp_path / "history.html"
    done = _cli(repo, "--json", str(out_json), "--html", str(out_html))
    assert done.returncode == 0, done.stderr  # no minimum effect: it only reports
    document = json.loads(out_json.read_text())
    assert document["kind"] == "history" and document["provenance"]["env_hash"]
    assert len(document["commits"]) == planted.COMMITS
    page = out_html.read_text()
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page
    assert f'href="#r0-c-{shas[6][:12]}"' in page and "env changed" in page
    # x1.3 and x1.2 memory steps: intervals lie beyond a 10% minimum effect -> the gate fails
    gated = _cli(repo, "--min-effect", "0.1")
    assert gated.returncode == 1 and "gate:" in gated.stderr
    assert _cli(repo, "--min-effect", "0.5").returncode == 0  # neither is beyond 50%


def test_bisect_names_the_planted_commit(
    built: tuple[Path, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, shas = built
    for name, value in planted.child_env().items():  # dvc and the venv's python on PATH
        monkeypatch.setenv(name, value)
    # the history says 11..14; 12 and 13 were never measured: 12 runs in a worktree
    result = bisect_step(repo, shas[11], shas[14], MEMORY)
    assert result.verdict == "found" and result.commit == shas[12], result.reason
    assert [(p.commit, p.source) for p in result.probes] == [(shas[12], "measured")]
    assert result.probes[0].ratio_vs_good == pytest.approx(9984 / 8320)
    again = bisect_step(repo, shas[11], shas[14], MEMORY)  # nothing is measured twice
    assert again.commit == shas[12] and again.probes[0].source == "saved"
    # the command, with a bare metric name (found in metrics/memory.json at BAD)
    named = _cli(repo, "--bisect", shas[11], shas[14], "--metric", "peak_cpu_tracked_tensors_bytes")
    assert named.returncode == 0 and f"commit {shas[12]}" in named.stdout, named.stderr
    unclear = _cli(repo, "--bisect", shas[15], shas[18], "--metric", MEMORY)
    assert unclear.returncode == 3 and "inconclusive" in unclear.stdout, unclear.stderr
    # GOOD and BAD the same: nothing to separate, and no commit blamed
    flat = bisect_step(repo, shas[15], shas[18], MEMORY)
    assert flat.verdict == "inconclusive" and flat.commit is None


def _doc_blocks(marker: str) -> list[str]:
    text = (planted.ROOT / "docs" / "history.md").read_text(encoding="utf-8")
    parts = text.split(f"<!-- docs-test: run in {marker} -->\n```bash\n")[1:]
    return [part.split("```", 1)[0] for part in parts]


def test_ci_recipes_run_on_a_clone(built: tuple[Path, list[str]], tmp_path: Path) -> None:
    repo, shas = built
    scheduled, gate = _doc_blocks("test_ci_recipes_run_on_a_clone")
    clone = tmp_path / "ci"
    planted.sh(tmp_path, "git", "clone", "-q", str(repo), str(clone))
    # the generated repository's cache stands in for the DVC remote (the same layout)
    planted.sh(clone, "dvc", "remote", "add", "--local", "-d", "ci", str(repo / ".dvc" / "cache"))
    run = subprocess.run(["bash", "-c", scheduled], cwd=clone, env=planted.child_env(),
                         capture_output=True, text=True, timeout=900, check=False)  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Running stage 'crawl'" not in run.stdout  # pulled: nothing is measured again
    assert (clone / "history.html").read_text().startswith("<!DOCTYPE html>")
    # nothing new was measured, so nothing to commit: results is main's head, pushed
    assert planted.sh(repo, "git", "rev-parse", "results").strip() == shas[-1]
    done = subprocess.run(["bash", "-c", gate], cwd=clone, env=planted.child_env(),
                          capture_output=True, text=True, timeout=900, check=False)  # fmt: skip
    assert done.returncode == 1 and "gate: " in done.stderr, done.stdout + done.stderr
