"""Full reports of past commits from the DVC cache, found by the md5 dvc.lock recorded.

Optional: the flat metrics come first. A report found here gives a point what the flat
metrics cannot carry: a partial value (a lower bound), why a number is unavailable, and a
latency median's own interval from its raw blocks.
"""

from __future__ import annotations

import configparser
import math
import os
from pathlib import Path
from typing import Any

from ..report import BenchmarkReport, MetricResult, ServedReport, load_report


def cache_dir(repo: str | os.PathLike[str]) -> Path:
    """The DVC cache of ``repo``: ``[cache] dir`` of .dvc/config.local or .dvc/config."""
    dvc = Path(repo) / ".dvc"
    for name in ("config.local", "config"):
        parser = configparser.ConfigParser()
        try:
            parser.read(dvc / name, encoding="utf-8")
        except (configparser.Error, UnicodeDecodeError):
            continue
        if parser.has_option("cache", "dir"):
            return (dvc / parser.get("cache", "dir")).resolve()
    return dvc / "cache"


class ReportCache:
    """Loads each cached report once (by md5); ``None`` where the cache lacks it."""

    def __init__(self, repo: str | os.PathLike[str]) -> None:
        self.root = cache_dir(repo)
        self._loaded: dict[str, Any] = {}

    def path(self, md5: str) -> Path | None:
        for candidate in (
            self.root / "files" / "md5" / md5[:2] / md5[2:],
            self.root / md5[:2] / md5[2:],
        ):
            if candidate.is_file():
                return candidate
        return None

    def loaded(self) -> int:
        """How many distinct reports were read."""
        return sum(1 for report in self._loaded.values() if report is not None)

    def report(self, md5: str | None) -> Any:
        if not md5:
            return None
        if md5 not in self._loaded:
            where = self.path(md5)
            try:
                self._loaded[md5] = load_report(where) if where is not None else None
            except (OSError, ValueError):
                self._loaded[md5] = None  # a damaged cache entry: the flat metrics still stand
        return self._loaded[md5]


INTERVAL_METRICS = frozenset({"warmed_median_s", "throughput_per_s"})
_LATENCY = {
    "warmed_median_s": "warmed",
    "first_call_s": "first_call",
    "throughput_per_s": "throughput",
}
_FLOPS = {"total_flops": "total", "product_flops": "product_flops"}


def metric_result(report: Any, name: str) -> MetricResult | None:
    """The MetricResult behind flat metric ``name`` of a stage's report, where known."""
    totals = getattr(report, "totals", None)
    if totals is not None and isinstance(getattr(totals, name, None), MetricResult):
        return getattr(totals, name)  # type: ignore[no-any-return]
    if getattr(report, "kind", None) == "flops" and name in _FLOPS:
        return getattr(report, _FLOPS[name], None)
    if isinstance(report, ServedReport):  # metrics/serve.json: serve.metrics names them
        from ..serve.metrics import served_field

        return served_field(report, name)
    if not isinstance(report, BenchmarkReport):
        return None
    if report.latency is not None and name in _LATENCY:
        return getattr(report.latency, _LATENCY[name])  # type: ignore[no-any-return]
    if report.memory is not None and name.startswith("peak_") and name.endswith("_bytes"):
        scope = name.removeprefix("peak_").removesuffix("_bytes")
        return next((r for r in report.memory.results if r.scope == scope), None)
    if report.rss is not None and name == "peak_rss_bytes":
        return report.rss.peak
    return None


def median_interval(blocks: list[float], confidence_z: float = 1.96) -> tuple[float, float] | None:
    """Distribution-free interval of a median from its blocks (order statistics)."""
    times = sorted(blocks)
    n = len(times)
    if n < 6:
        return None
    half = confidence_z * math.sqrt(n) / 2.0
    low = max(math.floor(n / 2.0 - half), 0)
    high = min(math.ceil(n / 2.0 + half), n - 1)
    return times[low], times[high]


def report_interval(report: Any, name: str, value: float) -> tuple[float, float] | None:
    """A latency figure's interval from the report's raw blocks (median, throughput)."""
    if not isinstance(report, BenchmarkReport) or report.latency is None:
        return None
    bounds = median_interval(list(report.latency.block_times_s))
    if bounds is None:
        return None
    median = report.latency.warmed.value
    if name == "warmed_median_s":
        return bounds
    if name == "throughput_per_s" and median:
        work = value * float(median)  # throughput = work / median
        return work / bounds[1], work / bounds[0]
    return None


def reason(report: Any, name: str) -> str | None:
    """The report's own words for why ``name`` is incomplete (its first matching diagnostic)."""
    for diagnostic in getattr(report, "diagnostics", []):
        metric = diagnostic.metric or ""
        if name in metric or (metric and metric.split(".")[-1] in name):
            return f"{diagnostic.code}: {diagnostic.message}"
    return None


__all__ = [
    "INTERVAL_METRICS",
    "ReportCache",
    "cache_dir",
    "median_interval",
    "metric_result",
    "reason",
    "report_interval",
]
