"""Results shared between machines through a git remote and a DVC remote.

Two clones stand for two machines on the same environment: the first runs an experiment
and pushes it (``dvc exp push``: git refs to the git remote, outputs to the DVC remote);
the second pulls it, lists it in ``dvc exp show``, applies it, and ``dvc repro`` there
restores the results instead of measuring. (DVC's run cache is not used: the stages' outputs
are ``persist: true``, which DVC excludes from the run cache; see docs/scale-out.md.) The
experiment runs the crawl stage only, to stay lean.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from pipeline_children import dvc_env
from pipeline_repo import PipelineRepos

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def _sh(cwd: Path, *cmd: str) -> str:
    result = subprocess.run(
        list(cmd), cwd=cwd, env=dvc_env(), capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, f"{cmd} ({result.returncode}):\n{result.stdout}\n{result.stderr}"
    return result.stdout + result.stderr


def _experiments(repo: Path) -> dict[str, dict[str, object]]:
    """Experiment name -> its params.yaml values, from `dvc exp show --json`."""
    found: dict[str, dict[str, object]] = {}
    for commit in _sh_json(repo):
        for experiment in commit.get("experiments") or []:  # type: ignore[attr-defined]
            for revision in experiment.get("revs") or []:
                data = revision.get("data") or {}
                params = (data.get("params") or {}).get("params.yaml", {}).get("data", {})
                found[str(revision.get("name"))] = params
    return found


def _sh_json(repo: Path) -> list[dict[str, object]]:
    result = subprocess.run(
        ["dvc", "exp", "show", "--json"], cwd=repo, env=dvc_env(), capture_output=True,
        text=True, timeout=300, check=True,
    )  # fmt: skip
    return list(json.loads(result.stdout))


def test_a_second_clone_lists_pulled_experiments_and_restores_instead_of_measuring(
    tmp_path: Path, pipeline_repos: PipelineRepos
) -> None:
    git_remote, dvc_remote = tmp_path / "origin.git", tmp_path / "dvc-remote"
    first, second = tmp_path / "first" / "repo", tmp_path / "second" / "repo"
    _sh(tmp_path, "git", "init", "-q", "--bare", "-b", "main", str(git_remote))
    pipeline_repos.committed_copy(first)
    _sh(first, "git", "remote", "add", "origin", str(git_remote))
    _sh(first, "git", "push", "-q", "origin", "main")
    _sh(first, "dvc", "remote", "modify", "--local", "storage", "url", str(dvc_remote))
    ran = _sh(first, "dvc", "exp", "run", "crawl", "-S", "seed=2", "-n", "t2")
    assert "Running stage 'crawl'" in ran  # measured here, on the first machine
    _sh(first, "dvc", "exp", "push", "origin", "t2")  # git refs to origin, outputs to the remote

    _sh(tmp_path, "git", "clone", "-q", str(git_remote), str(second))
    _sh(second, "dvc", "remote", "modify", "--local", "storage", "url", str(dvc_remote))
    _sh(second, "dvc", "exp", "pull", "origin", "t2")  # the experiment and its cached outputs
    assert _experiments(second)["t2"]["seed"] == 2  # the first clone's experiment is listed
    _sh(second, "dvc", "exp", "branch", "t2", "from-first")  # the experiment as a branch
    _sh(second, "git", "checkout", "-q", "from-first")
    _sh(second, "dvc", "checkout", "crawl")  # its outputs, from the pulled cache
    again = _sh(second, "dvc", "repro", "crawl")
    assert "Running stage 'crawl'" not in again, again  # restored, not measured again
    assert "Stage 'crawl' didn't change, skipping" in again, again
    restored = json.loads((second / "reports" / "crawl.json").read_text())
    # `dvc exp run` leaves t2's results in the first clone's workspace: the same report
    assert restored == json.loads((first / "reports" / "crawl.json").read_text())
    assert restored["provenance"]["run"]["config"]["seed"] == 2
