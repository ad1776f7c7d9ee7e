"""A comparison row in words: its statistic, its verdict and a short reason.

Every surface that shows a comparison row (the page's verdicts table, the index line, the
CI gate's Markdown, the stage's result line) reads these, so a row says the same thing
everywhere: one line of metric, ratio, interval, verdict and a reason under ~100
characters; the full reason goes behind a disclosure.
"""

from __future__ import annotations

from ..report import PerformanceDelta

SHORT_REASON = 80  # under ~100 characters, so the widest row still fits a 1,124 px page


def statistic_text(delta: PerformanceDelta) -> str:
    """What the baseline / candidate columns hold for this row (the table names it)."""
    method = delta.method
    if delta.scope == "first_call":
        return "one first call per side"
    if method.startswith("work_units_per_"):
        return "work / " + ("paired-median" if "paired" in method else "lower-decile") + " latency"
    if method.endswith("_paired_median"):
        return "median block; candidate = baseline × paired ratio"
    if method.endswith("_lower_decile"):
        return "lower decile of per-call block averages"
    return "one measurement per side"


def short_reason(reason: str | None, limit: int = SHORT_REASON) -> str:
    """The reason's first clause (up to ``"; "``), cut at a word under ``limit`` characters."""
    if not reason:
        return ""
    first = reason.split("; ", 1)[0].strip()
    if len(first) <= limit:
        return first
    head = first[: limit - 1]
    cut = head.rsplit(" ", 1)[0].rstrip(",;:(")
    return (cut if len(cut) >= limit // 2 else head) + "…"  # a long unbroken word: cut it


def verdict_label(delta: PerformanceDelta) -> str:
    """The verdict shown for a row (``withheld`` wins), with "loaded host" when it applies."""
    if delta.withheld or delta.verdict == "withheld":
        return "withheld"
    if delta.verdict in ("slower", "faster") and (delta.reason or "").startswith("loaded host"):
        return f"{delta.verdict} (loaded host)"
    return str(delta.verdict)


def comparison_verdict(deltas: list[PerformanceDelta]) -> tuple[str, str] | None:
    """The comparison's headline verdict, its warmed-latency row's, as (badge class, text):
    ``("slower", "latency: slower (loaded host)")``; None without a latency row."""
    for delta in deltas:
        if delta.metric == "latency.warmed":
            label = verdict_label(delta)
            return ("withheld" if label == "withheld" else delta.verdict), f"latency: {label}"
    return None


__all__ = ["comparison_verdict", "short_reason", "statistic_text", "verdict_label"]
