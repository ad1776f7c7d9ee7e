"""The shared DVC test repository setup: committed, independent copies, outputs left out."""

from __future__ import annotations

from pathlib import Path

from pipeline_repo import PipelineRepos, git


def test_each_copy_is_a_clean_commit_of_the_working_tree(
    tmp_path: Path, pipeline_repos: PipelineRepos
) -> None:
    first = pipeline_repos.committed_copy(tmp_path / "a" / "repo")
    second = pipeline_repos.committed_copy(tmp_path / "b" / "repo")
    for repo in (first, second):
        assert git(repo, "status", "--porcelain") == ""  # everything committed
        assert git(repo, "branch", "--show-current").strip() == "main"
        assert (repo / "dvc.yaml").is_file() and (repo / "conf" / "config.yaml").is_file()
        assert not (repo / "dvc.lock").exists()  # outputs of this checkout are not copied
    (first / "params.yaml").write_text("changed\n")
    assert git(second, "status", "--porcelain") == ""  # copies share nothing
