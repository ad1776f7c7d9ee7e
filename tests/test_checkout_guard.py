"""The checkout guard (tests/checkout_guard.py) fails a session that wrote into its checkout."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _scratch_repo(tmp_path: Path, body: str) -> Path:
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / ".gitignore").write_text("/outputs/\n")
    (repo / "tracked.txt").write_text("as committed\n")
    (repo / "tests" / "test_it.py").write_text(body)
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "start"]):
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@localhost", *args],
            cwd=repo, check=True, capture_output=True, timeout=60,
        )  # fmt: skip
    return repo


def _pytest(repo: Path) -> subprocess.CompletedProcess[str]:
    # Only the guard under test is loaded (-p): the installed plugins (hydra's, hypothesis,
    # xdist, ...) played no part in these sessions and cost ~4 s of CPU each to load.
    env = {**os.environ, "PYTHONPATH": str(HERE), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    return subprocess.run(
        [
            sys.executable, "-m", "pytest", "-q", "-p", "checkout_guard", "-p",
            "no:cacheprovider", "--rootdir", str(repo), str(repo / "tests"),
        ],
        cwd=repo, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


WRITES = """
from pathlib import Path
ROOT = Path(__file__).resolve().parents[1]

def test_rewrites_a_tracked_file():
    (ROOT / "tracked.txt").write_text("changed by a test")

def test_leaves_an_ignored_output():
    (ROOT / "outputs").mkdir()
    (ROOT / "outputs" / "run.log").write_text("x")
"""

KEEPS = """
def test_writes_under_tmp(tmp_path):
    (tmp_path / "report.json").write_text("{}")
"""


def test_a_session_that_writes_into_the_checkout_fails_naming_the_paths(tmp_path: Path) -> None:
    done = _pytest(_scratch_repo(tmp_path, WRITES))
    # both tests pass on their own: only the guard fails the session (exit 1 = tests failed)
    assert "2 passed" in done.stdout, done.stdout
    assert done.returncode == 1, done.stdout
    assert "the test session changed the checkout" in done.stdout
    assert "+  M tracked.txt" in done.stdout and "+ !! outputs/" in done.stdout


def test_a_session_that_writes_under_tmp_only_passes(tmp_path: Path) -> None:
    done = _pytest(_scratch_repo(tmp_path, KEEPS))
    assert done.returncode == 0, done.stdout
    assert "checkout changed" not in done.stdout
