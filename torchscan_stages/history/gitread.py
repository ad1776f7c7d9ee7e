"""Reading many commits' files straight from git objects: one ``git log``, one ``cat-file``.

No checkout per commit: ``git log --first-parent`` lists the commits once, and one
``git cat-file --batch`` process answers every ``COMMIT:PATH`` request. Blobs shared by many
commits (an unchanged metrics file) are read once, by object name.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

DEFAULT_LIMIT = 200
_SEP = "\x1f"


class GitError(RuntimeError):
    """A git command failed; the message names the command, the repository and git's words."""


@dataclass(frozen=True, slots=True)
class Commit:
    sha: str
    parents: tuple[str, ...]
    time: int  # committer time, seconds since the epoch (UTC)
    subject: str


def _git(repo: Path, *args: str, stdin: bytes | None = None) -> bytes:
    try:
        done = subprocess.run(
            ["git", *args], cwd=repo, input=stdin, capture_output=True, timeout=120, check=False
        )
    except FileNotFoundError:
        raise GitError("git is not installed (no `git` on PATH)") from None
    if done.returncode != 0:
        words = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GitError(
            f"`git {' '.join(args)}` failed in {repo}: {words[-1] if words else done.returncode}"
        )
    return done.stdout


def list_commits(
    repo: str | os.PathLike[str], rev_range: str | None = None, limit: int = DEFAULT_LIMIT
) -> list[Commit]:
    """First-parent commits of ``rev_range`` (default ``HEAD``), oldest first, at most ``limit``."""
    if limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit!r}")
    fmt = _SEP.join(("%H", "%P", "%ct", "%s"))
    out = _git(
        Path(repo),
        "log",
        "--first-parent",
        f"--max-count={limit}",
        f"--format={fmt}",
        rev_range or "HEAD",
        "--",
    )
    commits = []
    for line in out.decode("utf-8", "replace").splitlines():
        sha, parents, when, subject = line.split(_SEP, 3)
        commits.append(Commit(sha, tuple(parents.split()), int(when), subject))
    commits.reverse()
    return commits


class ObjectReader:
    """One ``git cat-file --batch`` process; ``read_many`` answers ``COMMIT:PATH`` names."""

    def __init__(self, repo: str | os.PathLike[str]) -> None:
        self.repo = Path(repo)
        self._names: dict[str, str | None] = {}  # request -> object name (None: missing)
        self._types: dict[str, str] = {}  # object name -> blob / tree
        self._blobs: dict[str, bytes] = {}  # object name -> content

    def read_many(self, requests: Iterable[str], kind: str = "blob") -> dict[str, bytes | None]:
        """Content of each ``REV:PATH`` (``None`` where no object of ``kind`` is there)."""
        asked = list(dict.fromkeys(requests))
        wanted = [r for r in asked if r not in self._names]
        if wanted:
            self._batch_names(wanted)
        names = {r: n if n is not None and self._types[n] == kind else None
                 for r in asked for n in [self._names[r]]}  # fmt: skip
        missing = {n for n in names.values() if n is not None} - set(self._blobs)
        if missing:
            self._batch_contents(sorted(missing))
        return {r: self._blobs[n] if n is not None else None for r, n in names.items()}

    def file_names(self, requests: Iterable[str]) -> dict[str, list[str]]:
        """Names of the files in each ``REV:FOLDER`` tree (empty where it is absent)."""
        trees = self.read_many(requests, kind="tree")
        size = len(next(iter(self._types), "0" * 40)) // 2  # 20 bytes (SHA-1), 32 (SHA-256)
        return {r: _tree_files(d, size) if d is not None else [] for r, d in trees.items()}

    def _batch_names(self, requests: list[str]) -> None:
        """Object names and types first (``--batch-check``): shared blobs are read once."""
        if any("\n" in r for r in requests):
            raise ValueError("a git object request cannot contain a newline")
        out = _git(
            self.repo, "cat-file", "--batch-check", stdin="\n".join(requests).encode() + b"\n"
        )
        lines = out.decode("utf-8", "replace").splitlines()
        if len(lines) != len(requests):
            raise GitError(f"git cat-file answered {len(lines)} lines for {len(requests)} names")
        for request, line in zip(requests, lines, strict=True):
            parts = line.split()
            ok = len(parts) == 3 and parts[1] in ("blob", "tree")
            self._names[request] = parts[0] if ok else None
            if ok:
                self._types[parts[0]] = parts[1]

    def _batch_contents(self, names: list[str]) -> None:
        out = _git(self.repo, "cat-file", "--batch", stdin="\n".join(names).encode() + b"\n")
        position = 0
        for name in names:
            header_end = out.index(b"\n", position)
            header = out[position:header_end].split()
            if len(header) != 3:
                raise GitError(f"git cat-file: unexpected header {header!r} for {name}")
            size = int(header[2])
            start = header_end + 1
            self._blobs[name] = out[start : start + size]
            position = start + size + 1  # the content is followed by one newline


def _tree_files(data: bytes, name_bytes: int) -> list[str]:
    """File names of a raw tree object: entries are ``MODE NAME\\0`` + the object name's bytes."""
    names, position = [], 0
    while position < len(data):
        space = data.index(b" ", position)
        nul = data.index(b"\0", space)
        mode = data[position:space]
        if not mode.startswith(b"4"):  # 40000: a sub-folder
            names.append(data[space + 1 : nul].decode("utf-8", "replace"))
        position = nul + 1 + name_bytes
    return names


def resolve(repo: str | os.PathLike[str], rev: str) -> str:
    """The full commit name of ``rev``; GitError naming it when git does not know it."""
    return _git(Path(repo), "rev-parse", "--verify", f"{rev}^{{commit}}").decode().strip()


def commits_between(repo: str | os.PathLike[str], good: str, bad: str) -> list[Commit]:
    """First-parent commits after ``good`` up to and including ``bad``, oldest first."""
    good_sha, bad_sha = resolve(repo, good), resolve(repo, bad)
    return [c for c in list_commits(repo, f"{good_sha}..{bad_sha}", limit=100_000)]


__all__ = [
    "DEFAULT_LIMIT",
    "Commit",
    "GitError",
    "ObjectReader",
    "commits_between",
    "list_commits",
    "resolve",
]
