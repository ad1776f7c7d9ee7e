"""End-to-end: the user's own model package is a dependency of the stages that build it.

From the reproduced pipeline on ``main`` (its outputs committed as the README says), a
branch adds ``my_models/`` and points the model and input groups at it (one full `dvc repro`
of it); a file outside the package reruns nothing, and after an edit of the model file DVC
would rerun exactly the stages that build the model (`dvc status`, DVC's own decision; one
of them really reruns).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pipeline_checks import (
    ALWAYS,
    ENV_ONLY,
    MEASUREMENTS,
    changed_stages,
    commit,
    commit_as_the_readme_says,
    no_warning,
)
from pipeline_repo import PipelineRepos, repro, run

from torchscan_stages.report import load_report
from torchscan_stages.report.fingerprint import SourcesReport

# A bound on a hang, not a timing claim: each test's `dvc repro` runs (and the first test's
# share of the reproduced template's full run) took up to 7.5 min at a load average of 8 on
# 2 cores (2026-12-01), over pytest's 600 s default; each child command keeps its own limit.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory, pipeline_repos: PipelineRepos) -> Path:
    path = pipeline_repos.reproduced_copy(tmp_path_factory.mktemp("mine") / "repo").path
    commit_as_the_readme_says(path)  # main's results, committed: the branch leaves them
    return path


USER_MODEL = """
import torch
from torch import nn


def build(seed: int = 0, width: int = 8) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(16, width), nn.ReLU(), nn.Linear(width, 4))


def example_batch(batch_size: int = 4, seed: int = 0) -> tuple[torch.Tensor]:
    return (torch.randn(batch_size, 16, generator=torch.Generator().manual_seed(seed)),)
"""
USER_CONF = {
    "model": "_target_: my_models.net.build\nname: mine\nrevision: '1'\n"
    "kwargs:\n  seed: ${seed}\n  width: 8\n",
    "input": "_target_: my_models.net.example_batch\nname: mine\nrevision: '1'\n"
    "kwargs:\n  batch_size: 4\n  seed: ${seed}\nwork_units: 4\nunit: samples\n",
}


def test_editing_the_users_model_file_reruns_exactly_the_model_stages(repo: Path) -> None:
    """The user's package (my_models/, not torchscan_stages/) is a dependency of its stages."""
    run(repo, "git", "checkout", "-q", "-b", "mine")
    package = repo / "my_models"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "net.py").write_text(USER_MODEL)
    for group, text in USER_CONF.items():
        (repo / "conf" / group / "mine.yaml").write_text(text)
    compose = ("python", "-m", "torchscan_stages.pipeline.compose")
    run(repo, *compose, "--set-default", "model=mine", "input=mine")
    assert repro(repo) == MEASUREMENTS | ALWAYS | {"render"}
    sources = load_report(repo / "reports" / "sources.json")
    assert isinstance(sources, SourcesReport)
    assert sources.sources["model"].package == "my_models" and sources.sources["model"].files == 2
    before = json.loads((repo / "metrics" / "crawl.json").read_text())["parameters"]
    # Linear(16, 8) + Linear(8, 4): 16*8+8 + 8*4+4 = 136 + 36 = 172 parameters
    assert before == 172
    commit(repo, "my own model")
    # a file outside the model's package: nothing measured again (env, sources always run)
    (repo / "NOTES.md").write_text("a file outside the model's package\n")
    assert repro(repo) == ALWAYS
    # the owner edits the model file (no revision bump): once `sources` has hashed it again,
    # DVC's own answer (`dvc status`: the stages whose dependencies changed, where `dvc repro`
    # starts; render follows them) is every stage that builds the model and nothing else;
    # one of them really reruns on the edited model
    (package / "net.py").write_text(
        USER_MODEL.replace("nn.ReLU(),", "nn.ReLU(), nn.Linear(width, width),")
    )
    assert repro(repo, "sources") == {"sources"}
    assert changed_stages(repo) == ALWAYS | MEASUREMENTS
    assert repro(repo, "crawl") == ALWAYS | {"crawl"}
    after = json.loads((repo / "metrics" / "crawl.json").read_text())["parameters"]
    assert after == 172 + 8 * 8 + 8  # one more Linear(8, 8): 64 weights + 8 biases
    commit(repo, "deeper model")
    run(repo, "git", "checkout", "-q", "main")
    no_warning(run(repo, "dvc", "checkout", check=False))
    assert no_warning(run(repo, "dvc", "status", check=False)) == ENV_ONLY
