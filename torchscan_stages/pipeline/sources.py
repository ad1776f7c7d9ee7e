"""The user's model code as a dependency: a fingerprint of the source ``_target_`` names.

DVC tracks ``torchscan_stages/`` and the params, not the package that ``model._target_``
or ``input._target_`` points into. ``sources_document`` finds that package *without
importing it* (``importlib.util.find_spec`` of its top-level name, then the file system)
and hashes every ``.py`` file of it, so an edit of ``my_models/net.py`` changes
``reports/sources.json`` and DVC reruns exactly the stages that depend on it: the stages
that build the model. Code installed into site-packages or the standard library is not
hashed (its version is the environment's business, ``reports/env.json``); ``revision``
stays for what source cannot show (weights, data files).

The document has no absolute paths and no timestamps: two clones of one commit write the
same bytes, so a second clone measures nothing again.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import site
import stat
import sysconfig
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The config sections whose ``_target_`` is code the stages call to build the workload.
SECTIONS = ("model", "input")


def _installed_roots() -> list[Path]:
    """Where installed (not the user's) code lives: site-packages and the standard library."""
    paths = sysconfig.get_paths()
    roots = [paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths]
    roots += [*site.getsitepackages(), site.getusersitepackages()]
    return [Path(root).resolve() for root in roots if root]


def _is_installed(path: Path, roots: Iterable[Path]) -> bool:
    resolved = path.resolve()
    return any(resolved.is_relative_to(root) for root in roots)


def module_name(target: str) -> str:
    """The module part of ``pkg.module.factory`` or ``pkg.module:factory``."""
    if ":" in target:
        return target.partition(":")[0]
    return target.rpartition(".")[0] or target


def package_files(module: str) -> tuple[str, list[Path]] | None:
    """The top-level package (or single-file module) ``module`` lives in, and its .py files.

    ``None`` when it cannot be found without importing (the stage that builds the model
    then fails with its own one-line error). The walk's own rules (regular files only,
    links followed once) are :func:`package_walk`'s; this keeps the plain file list.
    """
    found = package_walk(module)
    if found is None:
        return None
    return found.package, [file.path for file in found.files]


@dataclass(frozen=True)
class SourceFile:
    """One hashed file: its name as the package shows it (``mypkg/sub/net.py``, also through
    a symlinked sub-package) and where it is read from."""

    name: str
    path: Path


@dataclass
class PackageWalk:
    """What the walk found: the files to hash, and a note for each entry it left out."""

    package: str
    files: list[SourceFile] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    location: Path | None = None


def package_walk(module: str) -> PackageWalk | None:
    """Find ``module``'s top-level package without importing it and walk its source safely.

    Only regular files named ``*.py`` are read (a FIFO, socket or device is never opened:
    opening a FIFO blocks until someone writes); dangling links (an editor's lock file such
    as Emacs' ``.#net.py``) and folders named ``*.py`` are skipped with a note; a symlinked
    sub-package is followed once (a link back up the tree, or a second link to the same
    folder, is not walked again), so editing it changes the hash.
    """
    top = module.split(".", 1)[0]
    try:
        spec = importlib.util.find_spec(top)  # a top-level name: nothing is executed
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    walk = PackageWalk(package=top)
    locations = list(spec.submodule_search_locations or [])
    if locations:  # a package (regular or namespace): every .py file under it
        seen: set[tuple[int, int]] = set()
        for location in locations:
            walk.location = walk.location or Path(location)
            _walk_folder(Path(location), top, walk, seen)
        walk.files.sort(key=lambda file: tuple(file.name.split("/")))
    elif spec.origin and spec.has_location and spec.origin.endswith(".py"):
        origin = Path(spec.origin)
        walk.location = origin
        _add_file(origin, origin.name, walk)
    return walk  # built-in, frozen or an extension module: no source to hash


def _walk_folder(folder: Path, name: str, walk: PackageWalk, seen: set[tuple[int, int]]) -> None:
    """Add ``folder``'s .py files under the logical name ``name``; each real folder once."""
    try:
        info = folder.stat()
    except OSError as error:
        walk.skipped.append(f"{name}: cannot read the folder ({error.strerror})")
        return
    if (info.st_dev, info.st_ino) in seen:
        walk.skipped.append(f"{name}: a link to a folder already walked (not hashed twice)")
        return
    seen.add((info.st_dev, info.st_ino))
    try:
        entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
    except OSError as error:
        walk.skipped.append(f"{name}: cannot list the folder ({error.strerror})")
        return
    for entry in entries:
        if entry.name == "__pycache__":
            continue
        path, shown = Path(entry.path), f"{name}/{entry.name}"
        try:
            target = os.stat(entry.path)  # follows a link
        except OSError:
            if entry.is_symlink() and entry.name.endswith(".py"):
                walk.skipped.append(f"{shown}: a dangling link (an editor's lock file?)")
            continue
        if stat.S_ISDIR(target.st_mode):
            if entry.name.endswith(".py"):
                walk.skipped.append(f"{shown}: a folder named *.py, not a module")
            else:
                _walk_folder(path, shown, walk, seen)
        elif entry.name.endswith(".py"):
            _add_file(path, shown, walk, target.st_mode)


def _add_file(path: Path, name: str, walk: PackageWalk, mode: int | None = None) -> None:
    """Keep ``path`` if it is a regular file; note what else it is (never opened)."""
    if mode is None:
        try:
            mode = path.stat().st_mode
        except OSError as error:
            walk.skipped.append(f"{name}: cannot read it ({error.strerror})")
            return
    if stat.S_ISREG(mode):
        walk.files.append(SourceFile(name, path))
    else:
        walk.skipped.append(f"{name}: not a regular file ({_kind(mode)}), not opened")


def _kind(mode: int) -> str:
    for test, kind in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISDIR, "a folder")):  # fmt: skip
        if test(mode):
            return kind
    return "not a file"


def read_regular(path: Path) -> bytes:
    """The bytes of ``path``, refusing (OSError) anything but a regular file at open time.

    ``O_NONBLOCK``: a FIFO swapped in after the walk's ``stat`` opens without waiting for a
    writer, and ``fstat`` of the open descriptor then refuses it.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path.name} is not a regular file")
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def fingerprint(target: str, roots: list[Path] | None = None) -> dict[str, Any]:
    """One ``_target_``'s entry: its package, and a hash of its source unless installed.

    ``hashed`` lists the files read, by their name in the package; ``skipped`` the entries
    left out and why (a dangling link, a folder or FIFO named ``*.py``, an unreadable file).
    """
    module = module_name(target)
    found = package_walk(module)
    entry: dict[str, Any] = {"target": target, "module": module}
    if found is None:
        entry["source"] = "not found (the stage that imports it will say why)"
        return entry
    entry["package"] = found.package
    installed = roots if roots is not None else _installed_roots()
    if found.location is not None and _is_installed(found.location, installed):
        entry["source"] = "installed (site-packages or the standard library): not hashed"
        return entry
    if not found.files and not found.skipped:
        entry["source"] = "no Python source (built-in or extension module)"
        return entry
    digest = hashlib.sha256()
    hashed: list[str] = []
    skipped = list(found.skipped)
    for file in found.files:
        try:
            data = read_regular(file.path)
        except OSError as error:
            skipped.append(f"{file.name}: cannot read it ({error.strerror or error})")
            continue
        digest.update(file.name.encode() + b"\0" + data + b"\0")
        hashed.append(file.name)
    entry.update(files=len(hashed), sha256=digest.hexdigest(), hashed=hashed)
    if skipped:
        entry["skipped"] = skipped
    return entry


def sources_document(params: Mapping[str, Any]) -> dict[str, Any]:
    """``{"model": {...}, "input": {...}}`` for the config's ``_target_`` values."""
    roots = _installed_roots()
    document: dict[str, Any] = {}
    for section in SECTIONS:
        node = params.get(section)
        target = node.get("_target_") if isinstance(node, Mapping) else None
        if isinstance(target, str) and target:
            document[section] = fingerprint(target, roots)
    return document


__all__ = [
    "SECTIONS",
    "PackageWalk",
    "SourceFile",
    "fingerprint",
    "module_name",
    "package_files",
    "package_walk",
    "read_regular",
    "sources_document",
]
