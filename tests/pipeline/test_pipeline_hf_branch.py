"""End-to-end: a branch that switches the pipeline to a Hugging Face causal LM.

It starts from the reproduced pipeline on ``main`` (its outputs committed as the README
says), runs every default stage on a tiny GPT-2 built from config, and diffs params,
metrics and plots against ``main``; checking ``main`` out again brings its reports back.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pipeline_checks import (
    ALWAYS,
    ENV_ONLY,
    MEASUREMENTS,
    commit_as_the_readme_says,
    no_warning,
)
from pipeline_repo import PipelineRepos, repro, run

from torchscan_stages.report import load_report
from torchscan_stages.stages.render import ORDER as REPORTS

# A bound on a hang, not a timing claim: each test's `dvc repro` runs (and the first test's
# share of the reproduced template's full run) took up to 7.5 min at a load average of 8 on
# 2 cores (2026-12-01), over pytest's 600 s default; each child command keeps its own limit.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

COMPOSE = ("python", "-m", "torchscan_stages.pipeline.compose")


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory, pipeline_repos: PipelineRepos) -> Path:
    path = pipeline_repos.reproduced_copy(tmp_path_factory.mktemp("hf") / "repo").path
    commit_as_the_readme_says(path)  # main's results, committed: what the branch diffs against
    return path


def test_branch_on_an_hf_causal_lm_diffs_against_main(repo: Path) -> None:
    run(repo, "git", "checkout", "-q", "-b", "gpt2")
    run(repo, *COMPOSE, "--set-default", "model=gpt2", "input=hf_tokens")
    run(repo, *COMPOSE, "--check")  # the documented switch keeps the drift check green
    assert repro(repo) == MEASUREMENTS | ALWAYS | {"render"}  # every default stage, on GPT-2
    for name in REPORTS:
        run_info = load_report(repo / "reports" / f"{name}.json").provenance.run
        assert run_info is not None and run_info.model_name == "gpt2-tiny", name
    run(repo, "git", "add", "conf/config.yaml")  # the owner's conf change, committed as code
    commit_as_the_readme_says(repo)
    no_warning(run(repo, "dvc", "params", "diff", "main", check=False))
    params = json.loads(run(repo, "dvc", "params", "diff", "main", "--json").stdout)
    change = params["params.yaml"]["model.name"]
    assert (change["old"], change["new"]) == ("cnn", "gpt2-tiny")
    no_warning(run(repo, "dvc", "metrics", "diff", "main", check=False))
    metrics = json.loads(run(repo, "dvc", "metrics", "diff", "main", "--json").stdout)
    parameters = metrics["metrics/crawl.json"]["parameters"]
    assert parameters["old"] != parameters["new"]  # a different model, a different count
    plots = repo.parent / "plots-diff"
    no_warning(run(repo, "dvc", "plots", "diff", "main", "-o", str(plots), check=False))
    assert "cdn.jsdelivr" not in (plots / "index.html").read_text(encoding="utf-8")
    run(repo, "git", "checkout", "-q", "main")
    no_warning(run(repo, "dvc", "checkout", check=False))
    run_info = load_report(repo / "reports" / "crawl.json").provenance.run
    assert run_info is not None and run_info.model_name == "cnn"  # main's reports are back
    assert no_warning(run(repo, "dvc", "status", check=False)) == ENV_ONLY
