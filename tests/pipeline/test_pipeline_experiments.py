"""End-to-end: the side pipeline of one optimisation, and DVC's experiment queue.

Both start from the reproduced pipeline with its outputs committed as the README says (an
experiment starts from the committed dvc.lock and cache, as a user's would). The side
pipeline is a DVC project of its own; each queued experiment runs env, sources and the
latency stage (its target) in DVC's own temporary workspace.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from pipeline_checks import commit_as_the_readme_says
from pipeline_repo import PipelineRepos, repro, run

from torchscan_stages.report import load_report

# A bound on a hang, not a timing claim: each test's `dvc repro` runs (and the first test's
# share of the reproduced template's full run) took up to 7.5 min at a load average of 8 on
# 2 cores (2026-12-01), over pytest's 600 s default; each child command keeps its own limit.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory, pipeline_repos: PipelineRepos) -> Path:
    path = pipeline_repos.reproduced_copy(tmp_path_factory.mktemp("experiments") / "repo").path
    commit_as_the_readme_says(path)
    return path


def test_check_one_optimisation_pipeline(repo: Path) -> None:
    ran = repro(repo / "pipelines" / "check_optimisation")
    assert {"compare", "render"} <= {name.rsplit(":", 1)[-1] for name in ran}
    folder = repo / "pipelines" / "check_optimisation"
    comparison = load_report(folder / "reports" / "compare.json")
    assert comparison.kind == "benchmark_comparison"
    assert comparison.candidate_name is not None and "channels_last" in comparison.candidate_name
    assert comparison.check.performed and comparison.check.tolerance == {
        "rtol": 1.0e-4,
        "atol": 1.0e-5,
    }
    assert (folder / "reports" / "index.html").exists()


def test_experiment_queue_runs_a_threads_grid(repo: Path) -> None:
    """`dvc exp run --queue -S threads=1,2 latency` queues one experiment per value (Hydra
    syntax), each running the latency stage and what it depends on."""
    # DVC recomposes params.yaml from conf/ for experiments: conf/ holds the tiny timings
    queued = run(repo, "dvc", "exp", "run", "--queue", "-S", "threads=1,2", "latency").stdout
    assert queued.count("Queued experiment") == 2, queued
    run(repo, "dvc", "queue", "start", "-j", "1")
    deadline = time.monotonic() + 480
    status = ""
    while time.monotonic() < deadline:
        status = run(repo, "dvc", "queue", "status").stdout
        if not re.search(r"\b(Queued|Running)\b", status):
            break
        time.sleep(3)
    assert status.count("Success") == 2, status
    for task in re.findall(r"^(\w+)\s.*\bSuccess\b", status, re.M):
        log = run(repo, "dvc", "queue", "logs", task).stdout
        # the side pipelines are projects of their own: no missing-hash noise in the queue
        assert "No file hash info" not in log and "WARNING" not in log, log
    table = json.loads(run(repo, "dvc", "exp", "show", "--json").stdout)
    threads = set()
    for commit in table:
        for experiment in commit.get("experiments") or []:
            for revision in experiment.get("revs") or []:
                data = revision.get("data") or {}
                params = (data.get("params") or {}).get("params.yaml", {}).get("data", {})
                metrics = (data.get("metrics") or {}).get("metrics/latency.json", {}).get("data")
                if "threads" in params and metrics:
                    threads.add(params["threads"])
                    assert metrics["warmed_median_s"] > 0
    assert threads == {1, 2}
