"""read_history: every committed flat metric over a range of commits, grouped by comparability.

One ``git log`` lists the commits, one ``git cat-file`` process reads every metrics file,
dvc.lock and params.yaml (each distinct blob once), so 200 commits take about a second and
nothing is checked out or rerun. A point is ``complete`` when the flat metric is there and
dvc.lock's file dependencies match the commit (else it was not measured at that commit);
an absent flat metric is ``partial`` or ``unavailable`` as the DVC-cached report says.
Consecutive points with the same comparability key form a segment; a changed key starts a
new one, marked with what changed, and no step is ever fitted across it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..report import Status
from .cache import INTERVAL_METRICS, ReportCache, metric_result, reason, report_interval
from .gitread import DEFAULT_LIMIT, Commit, ObjectReader, list_commits
from .lockfile import StageLock, checkable_deps, parse_lock, stale_deps

METRICS_DIR = "metrics"
_OWNER_SUFFIXES = ("_budget", "_within_budget")  # the owner's settings, not measurements


@dataclass(slots=True)
class Point:
    """One metric at one commit. ``value`` is the complete value or a partial lower bound."""

    commit: str
    index: int  # position of the commit in History.commits
    status: Status
    value: float | None = None
    low: float | None = None  # the point's own interval, where known
    high: float | None = None
    interval: str | None = None  # how the interval was obtained
    note: str | None = None  # why partial / unavailable
    key: tuple[tuple[str, str], ...] | None = None


@dataclass(slots=True)
class Segment:
    """Points ``start`` to ``stop - 1`` of a series, all with one comparability key."""

    start: int
    stop: int
    key: dict[str, str]
    change: list[str] = field(default_factory=list)  # what differs from the segment before


@dataclass(slots=True)
class Series:
    metric: str  # "STAGE/NAME"
    stage: str
    name: str
    unit: str
    points: list[Point]
    segments: list[Segment] = field(default_factory=list)
    steps: list[Any] = field(default_factory=list)  # history.detect.Step, filled by detect


@dataclass(slots=True)
class History:
    repo: str
    rev_range: str
    commits: list[Commit]
    series: list[Series]
    reports_read: int = 0


def unit_of(name: str) -> str:
    """The unit a flat metric name states by its suffix (the pipeline's naming)."""
    for suffix, unit in (("_per_s", "/s"), ("_bytes", "B"), ("_s", "s"), ("flops", "FLOPs")):
        if name.endswith(suffix):
            return unit
    return ""


@dataclass(slots=True)
class _Commit:
    """What one commit holds: its stages' locks and flat metrics, and its dep blobs."""

    locks: dict[str, StageLock]
    metrics: dict[str, dict[str, float] | None]  # stage -> flat numbers (None: no file)
    stale: dict[str, list[str]]  # stage -> file deps that changed since the measurement


def _numbers(data: bytes | None) -> dict[str, float] | None:
    if data is None:
        return None
    try:
        document = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return {}
    if not isinstance(document, dict):
        return {}
    return {
        str(k): float(v)
        for k, v in document.items()
        if isinstance(v, int | float)
        and not isinstance(v, bool)
        and not k.endswith(_OWNER_SUFFIXES)
    }


def _read_commits(repo: Path, commits: list[Commit]) -> list[_Commit]:
    reader = ObjectReader(repo)
    trees = reader.file_names(f"{c.sha}:{METRICS_DIR}" for c in commits)
    names = {c.sha: sorted(n for n in trees[f"{c.sha}:{METRICS_DIR}"] if n.endswith(".json"))
             for c in commits}  # fmt: skip
    requests = [f"{c.sha}:{METRICS_DIR}/{n}" for c in commits for n in names[c.sha]]
    requests += [f"{c.sha}:{f}" for c in commits for f in ("dvc.lock", "params.yaml")]
    blobs = reader.read_many(requests)
    parsed_locks: dict[tuple[bytes | None, bytes | None], dict[str, StageLock]] = {}
    parsed: dict[bytes, dict[str, float] | None] = {}
    out: list[_Commit] = []
    for c in commits:
        pair = (blobs[f"{c.sha}:dvc.lock"], blobs[f"{c.sha}:params.yaml"])
        if pair not in parsed_locks:
            parsed_locks[pair] = parse_lock(*pair)
        metrics: dict[str, dict[str, float] | None] = {}
        for n in names[c.sha]:
            data = blobs[f"{c.sha}:{METRICS_DIR}/{n}"]
            key = data or b""
            if key not in parsed:
                parsed[key] = _numbers(data)
            metrics[n.removesuffix(".json")] = parsed[key]
        out.append(_Commit(parsed_locks[pair], metrics, {}))
    deps = [f"{c.sha}:{p}" for c, held in zip(commits, out, strict=True)
            for lock in held.locks.values() for p in checkable_deps(lock)]  # fmt: skip
    dep_blobs = reader.read_many(deps)
    for c, held in zip(commits, out, strict=True):
        for stage, lock in held.locks.items():
            mine = {p: dep_blobs[f"{c.sha}:{p}"] for p in checkable_deps(lock)}
            held.stale[stage] = stale_deps(lock, mine)
    return out


def _stage_of(held: _Commit, stem: str) -> str:
    """The dvc.lock stage that wrote ``metrics/STEM.json`` (the pipeline names it STEM)."""
    path = f"{METRICS_DIR}/{stem}.json"
    for stage, lock in held.locks.items():
        if path in lock.outs:
            return stage
    return stem


def _point(
    c: Commit, index: int, held: _Commit, stem: str, name: str, cache: ReportCache | None
) -> Point:
    stage = _stage_of(held, stem)
    lock = held.locks.get(stage) or held.locks[""]
    point = Point(commit=c.sha, index=index, status="unavailable", key=lock.key)
    flat = held.metrics.get(stem)
    if flat is None:  # nothing measured here: no key, so no segment of its own
        point.note, point.key = f"no {METRICS_DIR}/{stem}.json at this commit", None
        return point
    if held.stale.get(stage):
        changed = ", ".join(held.stale[stage])
        point.note = f"not measured at this commit: dvc.lock's {changed} is not this commit's"
        return point
    md5 = lock.outs.get(f"reports/{stage}.json")
    if name in flat:
        point.status, point.value = "complete", flat[name]
        # only a timing's report adds to a complete value (its interval): a large crawl
        # report is never loaded for a number the flat metrics already hold
        wanted = cache is not None and name in INTERVAL_METRICS
        report = cache.report(md5) if wanted and cache is not None else None
        bounds = report_interval(report, name, flat[name]) if report is not None else None
        if bounds is not None:
            point.low, point.high = bounds
            point.interval = "95% order-statistic interval of the median of the raw blocks"
        elif name == "warmed_median_s" and "warmed_iqr_s" in flat:
            half = flat["warmed_iqr_s"] / 2.0
            point.low, point.high = flat[name] - half, flat[name] + half
            point.interval = "median +- IQR/2 of the blocks (flat metrics; no block count)"
        return point
    report = cache.report(md5) if cache is not None else None
    result = metric_result(report, name) if report is not None else None
    if result is None:
        why = "the report is not in the DVC cache" if report is None else "the report lacks it"
        point.note = f"absent from {METRICS_DIR}/{stem}.json; {why}"
        return point
    point.status = result.status if result.status != "complete" else "unavailable"
    point.value = float(result.known_value) if result.known_value is not None else None
    point.note = reason(report, name) or f"{result.status} in the report"
    return point


def _segments(points: list[Point]) -> list[Segment]:
    """Runs of one comparability key; a point without a key (nothing measured at its
    commit) joins the run it is in, and a leading run of those takes the first key."""
    segments: list[Segment] = []
    current: tuple[tuple[str, str], ...] | None = None
    for i, point in enumerate(points):
        key = point.key
        if segments and (key is None or current is None or key == current):
            segments[-1].stop = i + 1
            if current is None and key is not None:
                segments[-1].key, current = dict(key), key
            continue
        old = dict(current or ())
        change = [f"{k}: {old.get(k)} -> {v}" for k, v in key or () if old.get(k) != v]
        segments.append(Segment(i, i + 1, dict(key or ()), change if current else []))
        current = key
    return segments


def read_history(
    repo: str | os.PathLike[str] = ".",
    rev_range: str | None = None,
    limit: int = DEFAULT_LIMIT,
    *,
    reports: bool = True,
) -> History:
    """Every committed flat metric at each first-parent commit of ``rev_range``, oldest first.

    ``rev_range`` is anything ``git log`` takes (``main~50..main``, a branch; default
    ``HEAD``); at most ``limit`` commits, the newest ones. ``reports=False`` skips the DVC
    cache (flat metrics only: an absent metric is then ``unavailable``). Raises GitError
    naming the git command when the range or repository is wrong.
    """
    root = Path(repo)
    commits = list_commits(root, rev_range, limit)
    held = _read_commits(root, commits)
    cache = ReportCache(root) if reports else None
    names: dict[tuple[str, str], None] = {}
    for h in held:
        for stem, flat in h.metrics.items():
            for name in flat or {}:
                names[(stem, name)] = None
    series = []
    for stem, name in sorted(names):
        points = [_point(c, i, h, stem, name, cache)
                  for i, (c, h) in enumerate(zip(commits, held, strict=True))]  # fmt: skip
        entry = Series(f"{stem}/{name}", stem, name, unit_of(name), points)
        entry.segments = _segments(points)
        series.append(entry)
    loaded = cache.loaded() if cache is not None else 0
    return History(str(root), rev_range or "HEAD", commits, series, loaded)


__all__ = ["History", "Point", "Segment", "Series", "read_history", "unit_of"]
