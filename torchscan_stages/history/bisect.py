"""bisect_step: narrow a step between GOOD and BAD to one commit, or say it cannot.

Each probed commit's report comes from the DVC cache when dvc.lock at that commit recorded
it and its file dependencies match (nothing measured is run again); otherwise the metric's
stage runs in a temporary ``git worktree`` of that commit with the repository's DVC cache
shared (``dvc repro STAGE``), so what it measures is cached for the next run too. Two
reports are compared as ``compare_benchmarks`` compares saved reports (latency: the
bootstrap interval of the block times; peak memory and counts: exact, against the minimum
effect). A probe that is neither like GOOD nor like BAD ends the search "inconclusive"
with the range narrowed so far: no commit is blamed that the noise cannot separate.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..compare.benchmarks import compare_benchmarks
from ..compare.deltas import Judge
from ..measure.latency_options import moved_into_options
from ..report import BenchmarkReport, load_report, save_report
from .cache import ReportCache, cache_dir, metric_result
from .gitread import GitError, ObjectReader, commits_between, resolve
from .lockfile import checkable_deps, parse_lock, stale_deps
from .metricsfile import EVIDENCE_SUFFIX, file_byte_limit, parse_metrics

Measure = Callable[[str], Any]  # commit -> the stage's report measured at that commit
CHANGED = {"slower", "faster", "increased", "decreased"}


@dataclass(slots=True)
class Probe:
    commit: str
    source: str  # "cache" (dvc.lock's report), "saved" (an earlier probe) or "measured"
    vs_good: str  # verdict of GOOD -> this commit
    vs_bad: str  # verdict of this commit -> BAD
    ratio_vs_good: float | None = None


@dataclass(slots=True)
class BisectResult:
    metric: str
    verdict: str  # "found" or "inconclusive"
    good: str  # the last commit known to be like GOOD
    bad: str  # the first commit known to be like BAD
    direction: str | None  # the step GOOD -> BAD: slower, increased, ...
    reason: str
    probes: list[Probe] = field(default_factory=list)

    @property
    def commit(self) -> str | None:
        """The commit that caused the step (only when found)."""
        return self.bad if self.verdict == "found" else None


class BisectError(RuntimeError):
    """The metric or stage could not be resolved, or a stage run failed (named)."""


class MetricNameError(BisectError, ValueError):
    """The metric named is not one of BAD's committed metrics (a bad argument: exit 2)."""


_LATENCY_DELTA = {"warmed_median_s": "latency.warmed", "throughput_per_s": "throughput"}


def verdict(before: Any, after: Any, name: str, judge: Judge) -> tuple[str, float | None]:
    """compare_benchmarks' verdict (and ratio) for flat metric ``name`` between two reports;
    a count is exact, judged against ``judge.min_effect``."""
    if isinstance(before, BenchmarkReport) and isinstance(after, BenchmarkReport):
        wanted = _LATENCY_DELTA.get(name)
        if wanted is None and name.startswith("peak_") and name.endswith("_bytes"):
            wanted = "memory." + name.removeprefix("peak_").removesuffix("_bytes")
        if wanted is not None:
            comparison = compare_benchmarks(before, after, judge=judge)
            for delta in comparison.deltas:
                if delta.metric == wanted or delta.metric.startswith(wanted):
                    return delta.verdict, delta.ratio
            return "inconclusive", None
    old, new = metric_result(before, name), metric_result(after, name)
    if old is None or new is None or not (old.is_complete and new.is_complete):
        return "inconclusive", None
    assert old.value is not None and new.value is not None
    if old.value <= 0:
        return "inconclusive", None
    ratio = float(new.value) / float(old.value)  # a count: exact, as _count_deltas judges it
    if abs(ratio - 1.0) <= judge.min_effect:
        return "no_difference", ratio
    return ("increased" if ratio > 1.0 else "decreased"), ratio


def stage_of_metric(repo: Path, rev: str, metric: str) -> tuple[str, str]:
    """("stage", "name") of ``STAGE/NAME`` or of a bare NAME found in metrics/ at ``rev``;
    MetricNameError naming the metric and the revision when ``rev`` does not hold it."""
    reader = ObjectReader(repo)
    files = reader.file_names([f"{rev}:metrics"])[f"{rev}:metrics"]
    stems = [f.removesuffix(".json") for f in files
             if f.endswith(".json") and not f.endswith(EVIDENCE_SUFFIX)]  # fmt: skip
    blobs = reader.read_many(
        (f"{rev}:metrics/{s}.json" for s in stems), max_bytes=file_byte_limit()
    )
    held = {s: parse_metrics(b).series_names for s in stems
            if (b := blobs[f"{rev}:metrics/{s}.json"]) is not None}  # fmt: skip
    if "/" in metric:
        stage, name = metric.split("/", 1)
        if name not in held.get(stage, []):
            raise MetricNameError(
                f"--metric {metric!r}: metrics/{stage}.json at {rev[:10]} has no {name!r} "
                f"(name it STAGE/NAME, such as {_example(held)})"
            )
        return stage, name
    found = sorted(stage for stage, names in held.items() if metric in names)
    if len(found) != 1:
        where = ", ".join(found) or "none of metrics/*.json"
        raise MetricNameError(
            f"--metric {metric!r} at {rev[:10]}: found in {where}; name it STAGE/NAME"
        )
    return found[0], metric


def _example(held: dict[str, list[str]]) -> str:
    return next((f"{s}/{n}" for s, names in sorted(held.items()) for n in names), "latency/NAME")


def cached_report(repo: Path, commit: str, stage: str, cache: ReportCache) -> Any:
    """The stage's report dvc.lock recorded at ``commit``, if cached and not stale."""
    reader = ObjectReader(repo)
    blobs = reader.read_many([f"{commit}:dvc.lock", f"{commit}:params.yaml"])
    lock = parse_lock(blobs[f"{commit}:dvc.lock"], blobs[f"{commit}:params.yaml"]).get(stage)
    if lock is None:
        return None
    deps = reader.read_many(f"{commit}:{p}" for p in checkable_deps(lock))
    if stale_deps(lock, {k.split(":", 1)[1]: v for k, v in deps.items()}):
        return None
    return cache.report(lock.outs.get(f"reports/{stage}.json"))


def saved_probe(repo: Path, commit: str, stage: str) -> Path:
    """Where a measured probe's report is kept (``.dvc/tmp`` is ignored by git and DVC)."""
    return repo / ".dvc" / "tmp" / "history-bisect" / f"{commit}-{stage}.json"


def worktree_measure(repo: Path, stage: str, env: dict[str, str] | None = None) -> Measure:
    """Run ``dvc repro STAGE`` in a temporary worktree of each commit, DVC cache shared;
    the report is kept (:func:`saved_probe`) so that it is never measured again."""
    shared = str(cache_dir(repo))

    def run(cmd: list[str], cwd: Path) -> None:
        done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            raise BisectError(f"`{' '.join(cmd)}` failed in {cwd}: {' | '.join(tail)}")

    def measure(commit: str) -> Any:
        scratch = Path(tempfile.mkdtemp(prefix=f"bisect-{commit[:10]}-"))
        tree = scratch / "tree"
        run(["git", "worktree", "add", "--detach", "--quiet", str(tree), commit], repo)
        try:
            run(["dvc", "cache", "dir", "--local", shared], tree)
            run(["dvc", "repro", stage], tree)
            report = load_report(tree / "reports" / f"{stage}.json")
            save_report(report, saved_probe(repo, commit, stage))
            return report
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=repo,
                           capture_output=True, check=False)  # fmt: skip
            shutil.rmtree(scratch, ignore_errors=True)

    return measure


@moved_into_options(judge=Judge)
def bisect_step(
    repo: str | os.PathLike[str],
    good: str,
    bad: str,
    metric: str,
    *,
    judge: Judge | Mapping[str, Any] | None = None,
    measure: Measure | None = None,
) -> BisectResult:
    """The first commit after ``good`` whose ``metric`` is like ``bad``'s, by binary search
    over the first-parent commits between them; "inconclusive" when a probe is neither.
    ``judge`` (a :class:`Judge` or a mapping of its fields) decides each pair of reports,
    as compare_benchmarks decides saved reports."""
    rule = Judge.from_mapping(judge)  # refused before any git work
    root = Path(repo)
    good_sha, bad_sha = resolve(root, good), resolve(root, bad)
    chain = [good_sha] + [c.sha for c in commits_between(root, good_sha, bad_sha)]
    if chain[-1] != bad_sha:
        raise GitError(f"{bad} is not a first-parent descendant of {good}")
    stage, name = stage_of_metric(root, bad_sha, metric)
    label = f"{stage}/{name}"
    cache = ReportCache(root)
    run = measure or worktree_measure(root, stage)
    probes: list[Probe] = []
    reports: dict[str, tuple[Any, str]] = {}

    def report_at(sha: str) -> Any:
        if sha not in reports:
            found, source = cached_report(root, sha, stage, cache), "cache"
            kept = saved_probe(root, sha, stage)
            if found is None and measure is None and kept.is_file():
                found, source = load_report(kept), "saved"
            reports[sha] = (found, source) if found is not None else (run(sha), "measured")
        return reports[sha][0]

    direction, ratio = verdict(report_at(good_sha), report_at(bad_sha), name, rule)
    if direction not in CHANGED:
        reason = f"GOOD and BAD are not told apart ({direction}); nothing to bisect"
        return BisectResult(label, "inconclusive", good_sha, bad_sha, None, reason, probes)
    lo, hi = 0, len(chain) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        probe = report_at(chain[mid])
        vs_good, r = verdict(report_at(good_sha), probe, name, rule)
        vs_bad, _ = verdict(probe, report_at(bad_sha), name, rule)
        probes.append(Probe(chain[mid], reports[chain[mid]][1], vs_good, vs_bad, r))
        if vs_good == "no_difference" and vs_bad == direction:
            lo = mid
        elif vs_good == direction and vs_bad == "no_difference":
            hi = mid
        else:
            reason = (
                f"{chain[mid][:10]} is neither like GOOD nor like BAD (GOOD->it: {vs_good}, "
                f"it->BAD: {vs_bad}); the step lies in {chain[lo][:10]}..{chain[hi][:10]}"
            )
            return BisectResult(
                label, "inconclusive", chain[lo], chain[hi], direction, reason, probes
            )
    size = f" x{ratio:.4g}" if ratio is not None else ""
    reason = f"{direction}{size} from GOOD to BAD first appears at {chain[hi][:10]}"
    return BisectResult(label, "found", chain[lo], chain[hi], direction, reason, probes)


__all__ = [
    "BisectError",
    "BisectResult",
    "MetricNameError",
    "Probe",
    "bisect_step",
    "verdict",
    "worktree_measure",
]
