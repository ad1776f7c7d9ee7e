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
_FIELDS = 4  # %H %P %ct %s, each ended by a NUL: a subject may hold any other character


class GitError(RuntimeError):
    """A git command failed; the message names the command, the repository and git's words."""


class RevisionError(GitError, ValueError):
    """A revision or range that cannot be given to git: it names the text and why."""


def check_revision(rev: str, what: str = "revision") -> str:
    """Refuse a revision git would read as an option (``--output=FILE``) or cannot take.

    git has no way to say "this word is a revision" before 2.24's ``--end-of-options``,
    and even then a range starting with ``-`` is never a revision a user meant.
    """
    if not isinstance(rev, str) or not rev.strip():
        raise RevisionError(f"{what} {rev!r} is empty; name a revision such as HEAD~5..HEAD")
    if rev.startswith("-"):
        raise RevisionError(
            f"{what} {rev!r} begins with '-', which git would read as an option; "
            "name a revision such as HEAD~5..HEAD"
        )
    if any(c in rev for c in "\n\r\0"):
        raise RevisionError(f"{what} {rev!r} holds a line break or NUL; no revision does")
    return rev


@dataclass(frozen=True, slots=True)
class Commit:
    sha: str
    parents: tuple[str, ...]
    time: int  # committer time, seconds since the epoch (UTC)
    subject: str


def check_repo(repo: str | os.PathLike[str]) -> Path:
    """The repository folder, refused in one line naming it when it is not a folder."""
    root = Path(repo)
    if not root.exists():
        raise RevisionError(f"repository {str(root)!r}: no such directory")
    if not root.is_dir():
        raise RevisionError(f"repository {str(root)!r} is not a directory")
    return root


def _git(repo: Path, *args: str, stdin: bytes | None = None) -> bytes:
    check_repo(repo)  # a missing cwd is FileNotFoundError too: never "git is not installed"
    try:
        done = subprocess.run(
            ["git", *args], cwd=repo, input=stdin, capture_output=True, timeout=120, check=False
        )
    except FileNotFoundError as error:
        if error.filename not in (None, "git"):
            raise RevisionError(f"repository {str(repo)!r}: {error.strerror}") from None
        raise GitError("git is not installed (no `git` on PATH)") from None
    if done.returncode != 0:
        words = done.stderr.decode("utf-8", "replace").strip().splitlines()
        last = words[-1] if words else str(done.returncode)
        if "not a git repository" in last:
            raise RevisionError(f"{str(repo)!r} is not a git repository ({last})")
        raise GitError(f"`git {' '.join(args)}` failed in {repo}: {last}")
    return done.stdout


def list_commits(
    repo: str | os.PathLike[str], rev_range: str | None = None, limit: int = DEFAULT_LIMIT
) -> list[Commit]:
    """First-parent commits of ``rev_range`` (default ``HEAD``), oldest first, at most ``limit``."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"limit must be an int >= 1, got {limit!r}")
    rev = check_revision(rev_range or "HEAD", "revision range")
    try:
        out = _git(
            Path(repo),
            "log",
            "--first-parent",
            f"--max-count={limit}",
            "--format=%H%x00%P%x00%ct%x00%s%x00",  # NUL after every field: no split on a subject
            "--end-of-options",
            rev,
            "--",
        )
    except RevisionError:
        raise
    except GitError as error:
        words = str(error).rsplit(": ", 1)[-1]
        if "revision" in words or "ambiguous argument" in words:
            raise RevisionError(f"unknown revision or range {rev!r} in {str(repo)!r} "
                                f"(git: {words})") from None  # fmt: skip
        raise
    fields = out.split(b"\0")
    commits = []
    for at in range(0, len(fields) - _FIELDS + 1, _FIELDS):
        sha, parents, when, subject = (f.decode("utf-8", "replace") for f in fields[at : at + 4])
        commits.append(Commit(sha.strip(), tuple(parents.split()), int(when), subject))
    commits.reverse()
    return commits


class ObjectReader:
    """One ``git cat-file --batch`` process; ``read_many`` answers ``COMMIT:PATH`` names."""

    def __init__(self, repo: str | os.PathLike[str]) -> None:
        self.repo = Path(repo)
        self._names: dict[str, str | None] = {}  # request -> object name (None: missing)
        self._types: dict[str, str] = {}  # object name -> blob / tree
        self._sizes: dict[str, int] = {}  # object name -> bytes
        self._blobs: dict[str, bytes] = {}  # object name -> content

    def read_many(
        self, requests: Iterable[str], kind: str = "blob", max_bytes: int | None = None
    ) -> dict[str, bytes | None]:
        """Content of each ``REV:PATH`` (``None`` where no object of ``kind`` is there, or,
        with ``max_bytes``, where it is larger: :meth:`size` tells the two apart). An
        oversized object is never read: its size comes from ``--batch-check``."""
        asked = list(dict.fromkeys(requests))
        wanted = [r for r in asked if r not in self._names]
        if wanted:
            self._batch_names(wanted)
        names = {}
        for request in asked:
            name = self._names[request]
            fits = name is not None and (max_bytes is None or self._sizes[name] <= max_bytes)
            names[request] = (
                name if fits and name is not None and self._types[name] == kind else None
            )
        missing = {n for n in names.values() if n is not None} - set(self._blobs)
        if missing:
            self._batch_contents(sorted(missing))
        return {r: self._blobs[n] if n is not None else None for r, n in names.items()}

    def size(self, request: str) -> int | None:
        """Bytes of the object a request named (``None``: there is none)."""
        name = self._names.get(request)
        return self._sizes.get(name) if name is not None else None

    def file_names(self, requests: Iterable[str]) -> dict[str, list[str]]:
        """Names of the files in each ``REV:FOLDER`` tree (empty where it is absent)."""
        trees = self.read_many(requests, kind="tree")
        size = len(next(iter(self._types), "0" * 40)) // 2  # 20 bytes (SHA-1), 32 (SHA-256)
        return {r: _tree_files(d, size) if d is not None else [] for r, d in trees.items()}

    def _batch_names(self, requests: list[str]) -> None:
        """Object names, types and sizes first (``--batch-check``): shared blobs are read
        once, and an oversized one not at all. A request git cannot take on one line (a
        file name holding a line break) is answered as missing."""
        for request in requests:
            if "\n" in request or "\r" in request:
                self._names[request] = None
        asked = [r for r in requests if r not in self._names]
        if not asked:
            return
        out = _git(self.repo, "cat-file", "--batch-check", stdin="\n".join(asked).encode() + b"\n")
        lines = out.decode("utf-8", "replace").splitlines()
        if len(lines) != len(asked):
            raise GitError(f"git cat-file answered {len(lines)} lines for {len(asked)} names")
        for request, line in zip(asked, lines, strict=True):
            parts = line.split()
            ok = len(parts) == 3 and parts[1] in ("blob", "tree") and parts[2].isdigit()
            self._names[request] = parts[0] if ok else None
            if ok:
                self._types[parts[0]] = parts[1]
                self._sizes[parts[0]] = int(parts[2])

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
    """The full commit name of ``rev``; RevisionError naming it when git does not know it."""
    check_revision(rev)
    try:
        out = _git(Path(repo), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    except RevisionError:
        raise
    except GitError:
        raise RevisionError(f"unknown revision {rev!r} in {str(repo)!r}") from None
    return out.decode().strip()


def commits_between(repo: str | os.PathLike[str], good: str, bad: str) -> list[Commit]:
    """First-parent commits after ``good`` up to and including ``bad``, oldest first."""
    good_sha, bad_sha = resolve(repo, good), resolve(repo, bad)
    return [c for c in list_commits(repo, f"{good_sha}..{bad_sha}", limit=100_000)]


__all__ = [
    "DEFAULT_LIMIT",
    "Commit",
    "GitError",
    "ObjectReader",
    "RevisionError",
    "check_repo",
    "check_revision",
    "commits_between",
    "list_commits",
    "resolve",
]
