"""The DVC test repository, set up one way for every end-to-end module.

A copy of the working tree as git sees it (tracked and untracked, not ignored; outputs
left out: benchmarks/worktree.py, shared with the pipeline benchmark), committed on
``main`` in a fresh repository under a temporary folder, never this checkout. The copy of
the working tree is made once per session (``PipelineRepos``) and each module gets its
own ``shutil.copytree`` of it, so no module sees another's DVC state.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

from pipeline_children import dvc_env

ROOT = Path(__file__).resolve().parents[2]


def _copy_working_tree(target: Path) -> None:
    spec = importlib.util.spec_from_file_location("_wt", ROOT / "benchmarks" / "worktree.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.copy_working_tree(ROOT, target)


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=repo, env=dvc_env(), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"git {args} ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return done.stdout


class PipelineRepos:
    """Hands out committed copies of the working tree; the first one is made from git."""

    def __init__(self, scratch: Path) -> None:
        self._scratch = scratch
        self._template: Path | None = None

    def _made(self) -> Path:
        if self._template is None:
            template = self._scratch / "template"
            _copy_working_tree(template)
            git(template, "init", "-q", "-b", "main")
            git(template, "add", "-A")
            git(template, "commit", "-qm", "pipeline copy")
            self._template = template
        return self._template

    def committed_copy(self, target: Path) -> Path:
        """A fresh repository at ``target`` holding the working tree, committed on main."""
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(self._made(), target, symlinks=True)
        return target
