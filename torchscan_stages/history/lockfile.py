"""What one commit's dvc.lock and params.yaml say about each stage's measurements.

The comparability of two flat metrics lives here: the params a stage ran with (model and
input name and revision, device, precision, threads) and the md5 DVC recorded for
``reports/env.json`` (the environment fingerprint every measurement depends on, so its md5
changes exactly when the environment hash does). Also: which report a stage wrote (its md5,
for the DVC cache) and which of its file dependencies git can check at that commit.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import yaml

ENV_REPORT = "reports/env.json"
KEY_FIELDS = ("model", "input", "device", "precision", "threads", "env")


@dataclass(frozen=True, slots=True)
class StageLock:
    """One stage's entry in dvc.lock (or, without one, what params.yaml says)."""

    key: tuple[tuple[str, str], ...]  # comparability: KEY_FIELDS -> text
    deps: dict[str, str] = field(default_factory=dict)  # path -> md5
    outs: dict[str, str] = field(default_factory=dict)  # path -> md5


def _load_yaml(data: bytes | None) -> dict[str, Any]:
    if not data:
        return {}
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        document = yaml.load(data, Loader=loader)  # a safe loader (C when built)
    except (yaml.YAMLError, RecursionError, ValueError):  # damaged, too deep: as if absent
        return {}
    return document if isinstance(document, dict) else {}


def _named(value: Any, *inner: str) -> str:
    """A config group as ``name@revision`` (or its one relevant field)."""
    if isinstance(value, dict):
        parts = [str(value.get(k)) for k in inner if value.get(k) is not None]
        return "@".join(parts) if parts else "?"
    return "?" if value is None else str(value)


def comparability(params: dict[str, Any], env: str | None) -> tuple[tuple[str, str], ...]:
    """The key two points must share to be compared (KEY_FIELDS order)."""
    values = {
        "model": _named(params.get("model"), "name", "revision"),
        "input": _named(params.get("input"), "name", "revision"),
        "device": _named(params.get("device"), "type", "index"),
        "precision": _named(params.get("precision"), "name", "apply"),
        "threads": _named(params.get("threads")),
        "env": env[:12] if env else "?",
    }
    return tuple((name, values[name]) for name in KEY_FIELDS)


def _files(entries: Any) -> dict[str, str]:
    """``path -> md5`` of a dvc.lock deps/outs list (anything else: none)."""
    if not isinstance(entries, list):
        return {}
    return {str(e.get("path")): str(e.get("md5")) for e in entries if isinstance(e, dict)}


def parse_lock(lock: bytes | None, params_yaml: bytes | None) -> dict[str, StageLock]:
    """Every stage of a dvc.lock; stages it lacks read params.yaml (env unknown: ``?``)."""
    stages: dict[str, StageLock] = {}
    listed = _load_yaml(lock).get("stages")
    for name, entry in (listed if isinstance(listed, dict) else {}).items():
        if not isinstance(entry, dict):
            continue  # a damaged entry: that stage falls back to params.yaml
        deps, outs = _files(entry.get("deps")), _files(entry.get("outs"))
        sections = entry.get("params")
        params: dict[str, Any] = {}
        for section in (sections if isinstance(sections, dict) else {}).values():
            if isinstance(section, dict):
                params.update(section)
        stages[str(name)] = StageLock(comparability(params, deps.get(ENV_REPORT)), deps, outs)
    fallback = comparability(_load_yaml(params_yaml), None)
    stages.setdefault("", StageLock(fallback))
    return stages


def checkable_deps(stage: StageLock) -> dict[str, str]:
    """File dependencies whose md5 git can check (a folder's md5 ends in ``.dir``;
    another stage's output, such as reports/, is not in git)."""
    return {
        path: md5
        for path, md5 in stage.deps.items()
        if not md5.endswith(".dir") and not path.startswith("reports/")
    }


def stale_deps(stage: StageLock, blobs: dict[str, bytes | None]) -> list[str]:
    """File dependencies whose committed content is not what dvc.lock measured."""
    stale = []
    for path, md5 in checkable_deps(stage).items():
        data = blobs.get(path)
        if data is not None and hashlib.md5(data, usedforsecurity=False).hexdigest() != md5:
            stale.append(path)
    return stale


__all__ = [
    "ENV_REPORT",
    "KEY_FIELDS",
    "StageLock",
    "checkable_deps",
    "comparability",
    "parse_lock",
    "stale_deps",
]
