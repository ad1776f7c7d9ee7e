"""The DVC test repository, set up one way for every end-to-end module.

A copy of the working tree as git sees it (tracked and untracked, not ignored; outputs
left out: benchmarks/worktree.py, shared with the pipeline benchmark), committed on
``main`` in a fresh repository under a temporary folder, never this checkout. The copy of
the working tree is made once per session (``PipelineRepos``) and each module gets its
own ``shutil.copytree`` of it, so no module sees another's DVC state.

``reproduced_copy`` hands out copies of a second template: the same tree with tiny timing
settings committed and one full ``dvc repro`` already run in it (its ``.dvc/cache`` and
``dvc.lock`` included, nothing of it committed). One full run per test run serves every
end-to-end module that starts from a reproduced pipeline, instead of one each; under
pytest-xdist the workers share it (built by the first to ask, under a file lock).
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml
from pipeline_children import dvc_env

ROOT = Path(__file__).resolve().parents[2]


def _copy_working_tree(target: Path) -> None:
    spec = importlib.util.spec_from_file_location("_wt", ROOT / "benchmarks" / "worktree.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.copy_working_tree(ROOT, target)


# Tiny timing so the e2e tier stays fast; the rss timeout stays generous (2-core CI). The
# max_run_time caps matter under load: a noisy host keeps sampling to the cap (5 s a side
# by default) in every latency and compare run of every full `dvc repro`.
TINY = {
    "latency": {"warmup": 0.0, "min_run_time": 0.05, "max_run_time": 1.0},
    "compare": {"warmup": 0.0, "min_run_time": 0.05, "max_run_time": 1.0},
    "profile": {"row_limit": 5},
}
# the serve stage's default option of its config group (conf/serve/): a short LoadGen run
TINY_GROUPS = {"serve/single_stream": {"duration_s": 0.1, "min_queries": 1}}


def run(
    repo: Path,
    *cmd: str,
    env: dict[str, str] | None = None,
    check: bool = True,
    timeout: float = 600,
) -> subprocess.CompletedProcess[str]:
    """One child command in ``repo`` under the tests' environment; raises on failure."""
    result = subprocess.run(
        list(cmd), cwd=repo, env=env or dvc_env(), capture_output=True, text=True, timeout=timeout
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"{cmd} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
        )
    return result


def git(repo: Path, *args: str) -> str:
    """``git ARGS`` in ``repo``; its stdout."""
    return run(repo, "git", *args, timeout=300).stdout


def repro(repo: Path, *targets: str, env: dict[str, str] | None = None) -> set[str]:
    """Run `dvc repro`; the names of the stages that actually ran."""
    out = run(repo, "dvc", "repro", *targets, env=env).stdout
    return set(re.findall(r"Running stage '([^']+)'", out))


def shrink_conf(repo: Path) -> None:
    """Tiny timings in conf/config.yaml itself, so params.yaml stays its composition."""
    path = repo / "conf" / "config.yaml"
    conf = yaml.safe_load(path.read_text(encoding="utf-8"))
    for section, values in TINY.items():
        conf[section].update(values)
    path.write_text(yaml.safe_dump(conf, sort_keys=False), encoding="utf-8")
    for option, values in TINY_GROUPS.items():
        group = repo / "conf" / f"{option}.yaml"
        settings = yaml.safe_load(group.read_text(encoding="utf-8"))
        settings.update(values)
        group.write_text(yaml.safe_dump(settings, sort_keys=False), encoding="utf-8")
    run(repo, "python", "-m", "torchscan_stages.pipeline.compose")


@dataclass(frozen=True)
class Reproduced:
    """A copy of the reproduced template, and the stages its one full `dvc repro` ran."""

    path: Path
    first_run: frozenset[str]


@contextmanager
def _exclusive(lock: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``lock`` (a file) for the block: one builder at a time."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class PipelineRepos:
    """Hands out committed copies of the working tree; the first one is made from git.

    ``shared`` is a folder every process of the test run sees (the xdist workers' common
    base temp); the reproduced template lives there, else under ``scratch``.
    """

    def __init__(self, scratch: Path, shared: Path | None = None) -> None:
        self._scratch = scratch
        self._shared = shared or scratch
        self._template: Path | None = None
        self._reproduced: Reproduced | None = None

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

    def _reproduced_template(self) -> Reproduced:
        if self._reproduced is None:
            folder = self._shared / "reproduced"
            marker = folder / "first_run.json"  # written last: the template is complete
            with _exclusive(self._shared / "reproduced.lock"):
                if not marker.exists():
                    shutil.rmtree(folder, ignore_errors=True)  # a builder that failed
                    template = self.committed_copy(folder / "repo")
                    shrink_conf(template)
                    git(template, "add", "-A")
                    git(template, "commit", "-qm", "tiny timings")
                    marker.write_text(json.dumps(sorted(repro(template))), encoding="utf-8")
            ran = frozenset(json.loads(marker.read_text(encoding="utf-8")))
            self._reproduced = Reproduced(folder / "repo", ran)
        return self._reproduced

    def reproduced_copy(self, target: Path) -> Reproduced:
        """A copy at ``target`` of the tiny-timing pipeline after one full `dvc repro`.

        The default DVC remote (``../torchscan_stages-dvc-storage``) resolves beside
        ``target``, so each copy pushes to a remote of its own.
        """
        made = self._reproduced_template()
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(made.path, target, symlinks=True)
        return Reproduced(target, made.first_run)
