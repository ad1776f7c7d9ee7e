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

import os
from dataclasses import dataclass, field
from typing import Any

from .cache import ReportCache
from .gitread import DEFAULT_LIMIT, Commit, ObjectReader, check_repo, list_commits
from .lockfile import StageLock, checkable_deps, parse_lock, stale_deps
from .metricsfile import (
    EVIDENCE_SUFFIX,
    Evidence,
    MetricsFile,
    file_byte_limit,
    parse_evidence,
    parse_metrics,
    too_large,
    unit_of,
)
from .points import METRICS_DIR, Held, Point, make_point

DEFAULT_RESULTS_FALLBACK = 50  # commits shown by default when none carries results


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
    range_note: str | None = None  # how a default range was chosen (printed by the CLI)


def _stems(reader: ObjectReader, commits: list[Commit]) -> dict[str, list[str]]:
    """Each commit's metrics files by stem (``latency`` for metrics/latency.json); the
    evidence sidecars are not metrics files of their own."""
    trees = reader.file_names(f"{c.sha}:{METRICS_DIR}" for c in commits)
    return {
        c.sha: sorted(
            n.removesuffix(".json")
            for n in trees[f"{c.sha}:{METRICS_DIR}"]
            if n.endswith(".json") and not n.endswith(EVIDENCE_SUFFIX)
        )
        for c in commits
    }


class _Parsed:
    """Blobs parsed once each, whatever the number of commits sharing them."""

    def __init__(self, reader: ObjectReader, cap: int) -> None:
        self.reader, self.cap = reader, cap
        self.metrics: dict[bytes, MetricsFile] = {}
        self.evidence: dict[bytes, Evidence] = {}
        self.locks: dict[tuple[bytes | None, bytes | None], dict[str, StageLock]] = {}

    def oversized(self, request: str) -> str | None:
        size = self.reader.size(request)
        return too_large(size, self.cap) if size is not None and size > self.cap else None

    def metrics_file(self, request: str, data: bytes | None) -> MetricsFile | None:
        if data is None:
            refused = self.oversized(request)
            return MetricsFile(error=refused) if refused else None
        if data not in self.metrics:
            self.metrics[data] = parse_metrics(data)
        return self.metrics[data]

    def sidecar(self, request: str, data: bytes | None) -> Evidence:
        if data is None:
            refused = self.oversized(request)
            return Evidence(None, refused) if refused else Evidence(None)
        if data not in self.evidence:
            self.evidence[data] = parse_evidence(data)
        return self.evidence[data]


def _read_commits(
    reader: ObjectReader, commits: list[Commit], stems: dict[str, list[str]], cap: int
) -> list[Held]:
    requests = [f"{c.sha}:{f}" for c in commits for f in ("dvc.lock", "params.yaml")]
    requests += [f"{c.sha}:{METRICS_DIR}/{n}{s}" for c in commits for n in stems[c.sha]
                 for s in (".json", EVIDENCE_SUFFIX)]  # fmt: skip
    blobs = reader.read_many(requests, max_bytes=cap)
    parsed = _Parsed(reader, cap)
    out: list[Held] = []
    for c in commits:
        pair = (blobs[f"{c.sha}:dvc.lock"], blobs[f"{c.sha}:params.yaml"])
        if pair not in parsed.locks:
            parsed.locks[pair] = parse_lock(*pair)
        held = Held(parsed.locks[pair], {}, {})
        for stem in stems[c.sha]:
            metrics, sidecar = (
                f"{c.sha}:{METRICS_DIR}/{stem}{s}" for s in (".json", EVIDENCE_SUFFIX)
            )
            held.metrics[stem] = parsed.metrics_file(metrics, blobs[metrics])
            held.evidence[stem] = parsed.sidecar(sidecar, blobs[sidecar])
        out.append(held)
    deps = [f"{c.sha}:{p}" for c, held in zip(commits, out, strict=True)
            for lock in held.locks.values() for p in checkable_deps(lock)]  # fmt: skip
    dep_blobs = reader.read_many(deps)
    for c, held in zip(commits, out, strict=True):
        for stage, lock in held.locks.items():
            mine = {p: dep_blobs[f"{c.sha}:{p}"] for p in checkable_deps(lock)}
            held.stale[stage] = stale_deps(lock, mine)
    return out


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


def _default_range(commits: list[Commit], stems: dict[str, list[str]]) -> tuple[list[Commit], str]:
    """The commits that carry results (from the oldest one with a metrics file), or the
    newest ones when none does: a clone of a project does not chart its development."""
    carrying = [i for i, c in enumerate(commits) if stems[c.sha]]
    if carrying:
        first = carrying[0]
        kept = commits[first:]
        note = (f"the {len(kept)} commit(s) since the first that carries results "
                f"({kept[0].sha[:10]}..{kept[-1].sha[:10]})")  # fmt: skip
        if first > 0:
            note += f"; {first} older commit(s) without results left out (--all shows them)"
        return kept, note
    kept = commits[-DEFAULT_RESULTS_FALLBACK:]
    return kept, (f"no commit carries results (metrics/*.json); the last {len(kept)} "
                  "commit(s) (--all shows every one up to --limit)")  # fmt: skip


def read_history(
    repo: str | os.PathLike[str] = ".",
    rev_range: str | None = None,
    limit: int = DEFAULT_LIMIT,
    *,
    reports: bool = True,
    whole: bool = False,
    max_file_mb: float | None = None,
) -> History:
    """Every committed flat metric at each first-parent commit of ``rev_range``, oldest first.

    ``rev_range`` is anything ``git log`` takes (``main~50..main``, a branch; never text
    starting with ``-``); at most ``limit`` commits, the newest ones. Without a range, the
    commits that carry results (the oldest with a ``metrics/`` file onwards), or the last
    50 when none does; ``whole=True`` keeps every commit up to ``limit``. ``reports=False``
    skips the DVC cache (flat metrics only). A metrics file over ``max_file_mb`` (default
    ``TORCHSCAN_STAGES_MAX_METRICS_MB`` or 4 MiB) is not read: its points are unavailable.
    Raises GitError (RevisionError for a bad range or repository) naming what was wrong.
    """
    root = check_repo(repo)
    cap = file_byte_limit(max_file_mb)
    commits = list_commits(root, rev_range, limit)
    reader = ObjectReader(root)
    stems = _stems(reader, commits)
    note = None
    if rev_range is None and not whole:
        commits, note = _default_range(commits, stems)
    held = _read_commits(reader, commits, stems, cap)
    cache = ReportCache(root) if reports else None
    names: dict[tuple[str, str], None] = {}
    for h in held:
        for stem, flat in h.metrics.items():
            for name in flat.series_names if flat is not None else ():
                names[(stem, name)] = None
    series = []
    for stem, name in sorted(names):
        points = [make_point(c, i, h, stem, name, cache)
                  for i, (c, h) in enumerate(zip(commits, held, strict=True))]  # fmt: skip
        entry = Series(f"{stem}/{name}", stem, name, unit_of(name), points)
        entry.segments = _segments(points)
        series.append(entry)
    loaded = cache.loaded() if cache is not None else 0
    return History(str(root), rev_range or "HEAD", commits, series, loaded, note)


__all__ = ["History", "Point", "Segment", "Series", "read_history", "unit_of"]
