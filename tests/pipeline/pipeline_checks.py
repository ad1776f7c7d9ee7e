"""What the DVC end-to-end modules check, in one place: stage sets, params edits, commits.

The stage-set constants name what `dvc repro` runs; ``changed_stages`` reads `dvc status`,
which is DVC's own rerun decision for a stage whose params or dependency files changed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml
from pipeline_children import BIN, dvc_env
from pipeline_repo import run

ROOT = Path(__file__).resolve().parents[2]

MEASUREMENTS = {"crawl", "flops", "memory", "latency", "rss", "profile", "compare", "predict"}
# Run on every `dvc repro` (always_changed), each rewriting its output only when it changed.
ALWAYS = {"env", "sources"}
# `dvc status` always lists an always_changed stage, even when everything is up to date.
ENV_ONLY = "env:\n\talways changed\nsources:\n\talways changed\n"


def set_params(repo: Path, **dotted: object) -> None:
    """Edit params.yaml in place: ``set_params(repo, **{"latency.min_run_time": 0.06})``."""
    path = repo / "params.yaml"
    params = yaml.safe_load(path.read_text(encoding="utf-8"))
    for key, value in dotted.items():
        node = params
        *parents, leaf = key.split(".")
        for part in parents:
            node = node[part]
        node[leaf] = value
    path.write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")


def commit(repo: Path, message: str) -> None:
    run(repo, "git", "add", "-A")
    run(repo, "git", "commit", "-qm", message)


def no_warning(result: subprocess.CompletedProcess[str]) -> str:
    """The command's output, asserting it succeeded without a warning, error or failure."""
    text = result.stdout + result.stderr
    assert result.returncode == 0, text
    assert not re.search(r"warning|error|failed", text, re.I), text
    return text


def readme_commit_block() -> str:
    """The README's commit recipe, exactly as a user copies it."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    marker = "test_commit_as_the_readme_says) -->\n```bash\n"
    return text[text.index(marker) + len(marker) :].split("```", 1)[0]


def commit_as_the_readme_says(repo: Path) -> None:
    """The README's block as a user runs it after `make main`: a new shell from the clone's
    root, the venv at `.venv` (here a link to the tests' venv, excluded from git) and not on
    PATH, so a bare `dvc` in the block would fail as it does for a newcomer."""
    venv = repo / ".venv"
    if not venv.exists():
        venv.symlink_to(Path(sys.prefix), target_is_directory=True)
        with (repo / ".git" / "info" / "exclude").open("a", encoding="utf-8") as exclude:
            exclude.write("\n/.venv\n")
    env = dvc_env()
    env["PATH"] = os.pathsep.join(
        part for part in env["PATH"].split(os.pathsep) if Path(part) != BIN
    )
    run(repo, "bash", "-euo", "pipefail", "-c", readme_commit_block(), env=env)


def changed_stages(repo: Path) -> set[str]:
    """The stages `dvc status` would rerun (always_changed ones included)."""
    return set(json.loads(run(repo, "dvc", "status", "--json").stdout))
