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
import site
import sysconfig
from collections.abc import Iterable, Mapping
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
    then fails with its own one-line error).
    """
    top = module.split(".", 1)[0]
    try:
        spec = importlib.util.find_spec(top)  # a top-level name: nothing is executed
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    locations = list(spec.submodule_search_locations or [])
    if locations:  # a package (regular or namespace): every .py file under it
        files = [
            path
            for location in locations
            for path in Path(location).rglob("*.py")
            if "__pycache__" not in path.parts
        ]
        return top, sorted(set(files))
    if spec.origin and spec.has_location and spec.origin.endswith(".py"):
        return top, [Path(spec.origin)]
    return top, []  # built-in, frozen or an extension module: no source to hash


def _relative(path: Path, base: Path) -> str:
    try:
        return path.resolve().relative_to(base.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def fingerprint(target: str, roots: list[Path] | None = None) -> dict[str, Any]:
    """One ``_target_``'s entry: its package, and a hash of its source unless installed."""
    module = module_name(target)
    found = package_files(module)
    entry: dict[str, Any] = {"target": target, "module": module}
    if found is None:
        entry["source"] = "not found (the stage that imports it will say why)"
        return entry
    top, files = found
    entry["package"] = top
    if not files:
        entry["source"] = "no Python source (built-in or extension module)"
        return entry
    if _is_installed(files[0], roots if roots is not None else _installed_roots()):
        entry["source"] = "installed (site-packages or the standard library): not hashed"
        return entry
    base = _package_base(files, top)
    digest = hashlib.sha256()
    for path in files:
        name = _relative(path, base)
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    entry.update(files=len(files), sha256=digest.hexdigest())
    return entry


def _package_base(files: list[Path], top: str) -> Path:
    """The folder above the package, so hashed names read ``mypkg/net.py`` in every clone."""
    first = files[0].resolve()
    for parent in first.parents:
        if parent.name == top:
            return parent.parent
    return first.parent


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


__all__ = ["SECTIONS", "fingerprint", "module_name", "package_files", "sources_document"]
