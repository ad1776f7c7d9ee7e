"""A pytest plugin: the suite fails when it changed the checkout it runs from.

Tests write only under temporary folders. This compares ``git status --porcelain --ignored``
of the repository before and after the session (caches that Python and the tools keep
beside the code excluded), so a test that rewrites a tracked file, or leaves a new file,
tracked-looking or git-ignored (``outputs/``, ``reports/x.json``), makes the run fail
with the paths it changed. Under pytest-xdist (``-n``) only the controller checks, once
around the whole run: its session ends after every worker's, and its exit status is the
run's. Loaded by ``tests/conftest.py``; outside a git checkout (an
sdist) it does nothing.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

# Written by Python and the tools themselves, not by any test.
CACHES = frozenset(
    {
        "__pycache__",
        ".pytest_cache",
        ".mypy_cache",
        ".ruff_cache",
        ".hypothesis",
        ".venv",
    }
)


def checkout_state(root: Path) -> set[str] | None:
    """The porcelain status lines of ``root``, caches left out; ``None`` outside git."""
    if shutil.which("git") is None or not (root / ".git").exists():
        return None
    done = subprocess.run(
        ["git", "status", "--porcelain", "--ignored"],
        cwd=root, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        return None
    lines = set()
    for line in done.stdout.splitlines():
        path = line[3:].strip('"')
        parts = path.rstrip("/").split("/")
        if any(part in CACHES or part.endswith(".egg-info") for part in parts):
            continue
        lines.add(line)
    return lines


def changed(before: set[str], after: set[str]) -> list[str]:
    """What the session added (``+``) or took away (``-``), sorted by path."""
    return sorted(
        [f"+ {line}" for line in after - before] + [f"- {line}" for line in before - after],
        key=lambda entry: entry[5:],
    )


ROOT_KEY = pytest.StashKey[Path]()
BEFORE_KEY = pytest.StashKey[set[str]]()


def pytest_sessionstart(session: pytest.Session) -> None:
    if hasattr(session.config, "workerinput"):
        return  # an xdist worker: the controller compares the whole run's before/after
    root = Path(str(session.config.rootpath))
    state = checkout_state(root)
    if state is not None:
        session.stash[ROOT_KEY] = root
        session.stash[BEFORE_KEY] = state


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if BEFORE_KEY not in session.stash:
        return
    root = session.stash[ROOT_KEY]
    after = checkout_state(root)
    if after is None:
        return
    entries = changed(session.stash[BEFORE_KEY], after)
    if not entries:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    text = (
        f"the test session changed the checkout {root} (tests must write under tmp dirs only; "
        "`git status --porcelain --ignored` before/after):\n  " + "\n  ".join(entries)
    )
    if reporter is not None:
        reporter.write_sep("=", "checkout changed", red=True)
        reporter.write_line(text)
    else:
        print(text)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
