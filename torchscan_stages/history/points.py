"""One metric at one commit: its status, value, interval, and the evidence behind it.

A point is ``complete`` when the flat metric is there and dvc.lock's file dependencies
match the commit; it is *clean* only when the commit's evidence sidecar
(``metrics/<stage>.evidence.json``, :mod:`torchscan_stages.report.evidence`) says the value
is complete with no validity warning and no inconclusive verdict. A commit without a sidecar
(results written before sidecars) is "evidence not recorded": weak, not clean, and said so.
Only clean points make a confident step (:mod:`.detect`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..report import Status
from .cache import INTERVAL_METRICS, ReportCache, metric_result, reason, report_interval
from .gitread import Commit
from .lockfile import StageLock
from .metricsfile import EVIDENCE_SUFFIX, NOT_RECORDED, UNREADABLE, Evidence, MetricsFile

METRICS_DIR = "metrics"
_NOT_CONFIDENT = ("inconclusive", "withheld", "not_comparable")


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
    clean: bool = False  # complete, no validity warning, evidence recorded
    warnings: list[str] = field(default_factory=list)  # validity warning codes
    evidence: str | None = None  # one line: why the point is weak (None: clean)
    verdict: str | None = None  # a comparison metric's verdict at this commit


@dataclass(slots=True)
class Held:
    """What one commit holds: its stages' locks, flat metrics and evidence sidecars."""

    locks: dict[str, StageLock]
    metrics: dict[str, MetricsFile | None]  # stem -> the file (None: no file)
    evidence: dict[str, Evidence]  # stem -> its sidecar
    stale: dict[str, list[str]] = field(default_factory=dict)  # stage -> changed file deps


def where(stem: str, sha: str, suffix: str = ".json") -> str:
    """``metrics/STEM.json at COMMIT``: how every note names a file."""
    return f"{METRICS_DIR}/{stem}{suffix} at {sha[:10]}"


def _stage_of(held: Held, stem: str) -> str:
    """The dvc.lock stage that wrote ``metrics/STEM.json`` (the pipeline names it STEM)."""
    path = f"{METRICS_DIR}/{stem}.json"
    for stage, lock in held.locks.items():
        if path in lock.outs:
            return stage
    return stem


def make_point(
    c: Commit, index: int, held: Held, stem: str, name: str, cache: ReportCache | None
) -> Point:
    """The point of ``stem/name`` at commit ``c`` (``index`` in the history)."""
    stage = _stage_of(held, stem)
    lock = held.locks.get(stage) or held.locks[""]
    point = Point(commit=c.sha, index=index, status="unavailable", key=lock.key)
    flat = held.metrics.get(stem)
    if flat is None:  # nothing measured here: no key, so no segment of its own
        point.note, point.key = f"no {METRICS_DIR}/{stem}.json at this commit", None
        return point
    if flat.error is not None or name in flat.bad:
        point.note = f"{where(stem, c.sha)}: {flat.error or f'{name}: {flat.bad[name]}'}"
        return point
    if held.stale.get(stage):
        changed = ", ".join(held.stale[stage])
        point.note = f"not measured at this commit: dvc.lock's {changed} is not this commit's"
        return point
    md5 = lock.outs.get(f"reports/{stage}.json")
    if name in flat.numbers:
        point.status, point.value = "complete", flat.numbers[name]
        _interval(point, flat.numbers, name, cache, md5)
        _weigh(point, held.evidence.get(stem) or Evidence(None), stem, name)
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


def _interval(
    point: Point, flat: dict[str, float], name: str, cache: ReportCache | None, md5: str | None
) -> None:
    """A complete timing value's own interval: the report's blocks, else the flat IQR."""
    value = flat[name]
    # only a timing's report adds to a complete value (its interval): a large crawl
    # report is never loaded for a number the flat metrics already hold
    wanted = cache is not None and name in INTERVAL_METRICS
    report = cache.report(md5) if wanted and cache is not None else None
    bounds = report_interval(report, name, value) if report is not None else None
    if bounds is not None:
        point.low, point.high = bounds
        point.interval = "95% order-statistic interval of the median of the raw blocks"
    elif name == "warmed_median_s" and "warmed_iqr_s" in flat:
        half = flat["warmed_iqr_s"] / 2.0
        point.low, point.high = max(value - half, 0.0), value + half
        point.interval = "median +- IQR/2 of the blocks (flat metrics; no block count)"


def _weigh(point: Point, evidence: Evidence, stem: str, name: str) -> None:
    """Clean or weak, from the commit's sidecar; a comparison's interval only when its
    verdict was confident (an inconclusive compare carries none)."""
    sidecar = where(stem, point.commit, EVIDENCE_SUFFIX)
    if evidence.entries is None:
        if evidence.error is not None:
            point.warnings = [UNREADABLE]
            point.evidence = f"evidence unreadable ({sidecar}: {evidence.error})"
        else:
            point.warnings = [NOT_RECORDED]
            point.evidence = (
                f"evidence not recorded (no {sidecar}: results written before evidence "
                "sidecars); rerun the stage to record it"
            )
        return
    entry = evidence.entries.get(name)
    if entry is None:
        point.warnings = [NOT_RECORDED]
        point.evidence = f"evidence not recorded ({sidecar} has no entry for {name})"
        return
    point.verdict = entry.verdict
    if entry.status != "complete":  # the sidecar knows better than the bare number
        point.status = entry.status
        point.note = entry.note or f"{entry.status} in {sidecar}"
        if entry.status == "unavailable":
            point.value = None
    point.warnings = list(entry.warnings)
    if entry.verdict in _NOT_CONFIDENT and entry.verdict not in point.warnings:
        point.warnings.append(entry.verdict)
    point.clean = entry.clean and point.status == "complete"
    if not point.clean:
        point.evidence = entry.note or ", ".join(point.warnings) or f"{entry.status} value"
        return
    value = point.value
    if entry.interval is not None and value is not None:
        low, high = entry.interval
        if low <= value <= high:
            point.low, point.high = low, high
            point.interval = f"the {stem} stage's interval ({entry.verdict} verdict)"


__all__ = ["METRICS_DIR", "Held", "Point", "make_point", "where"]
