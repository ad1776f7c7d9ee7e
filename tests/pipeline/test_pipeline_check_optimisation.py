"""End-to-end: the side pipeline that checks one optimisation (`make check-optimisation`).

It is a DVC project of its own under pipelines/check_optimisation, composing its compare
stage from the root conf/: a committed copy of the working tree with the tiny timings is all
it needs. (DVC's experiment queue is tested with the launchers' grid:
tests/pipeline/test_scale_launchers.py.)
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pipeline_repo import PipelineRepos, git, repro, shrink_conf

from torchscan_stages.report import load_report

# A bound on a hang, not a timing claim: each test's `dvc repro` runs (and the first test's
# share of the reproduced template's full run) took up to 7.5 min at a load average of 8 on
# 2 cores (2026-12-01), over pytest's 600 s default; each child command keeps its own limit.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory, pipeline_repos: PipelineRepos) -> Path:
    path = pipeline_repos.committed_copy(tmp_path_factory.mktemp("optimisation") / "repo")
    shrink_conf(path)
    git(path, "commit", "-qam", "tiny timings")
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
