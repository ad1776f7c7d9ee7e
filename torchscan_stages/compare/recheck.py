"""A saved comparison's latency delta, recomputed from the raw blocks it records.

The gate decides on ``latency.warmed``; a file whose ratio, interval or verdict was edited
must not pass it. Every field is checked for consistency when the file loads (see
``report/consistency.py``), and here the decisive delta is recomputed from the recorded
block times with the recorded judge settings (seeded bootstrap: the same numbers come out).
A delta that does not follow from its own blocks is refused; one with no blocks to recompute
it from cannot be verified.
"""

from __future__ import annotations

import math
from typing import Any

from ..report import BenchmarkComparison, PerformanceDelta
from .deltas import Judge, latency_delta
from .judging import paired_deltas
from .paired import run_from_record

_JUDGE_KEYS = {
    "min_effect": "min_effect",
    "max_noise": "max_noise",
    "ci_floor": "ci_floor",
    "confidence": "confidence",
    "resamples": "resamples",
    "seed": "bootstrap_seed",
    "min_blocks": "min_blocks",
    "aa_control": "aa_control",
    "min_cpu_share": "min_cpu_share",
}
_OPTIONAL = {"aa_control", "min_cpu_share"}  # recorded since the paired rule (issue 26)
RTOL = 1e-9


def _blocks(comparison: BenchmarkComparison) -> tuple[list[float], list[float]] | None:
    sides = (comparison.baseline, comparison.candidate)
    if any(side is None or side.latency is None for side in sides):
        return None
    base, cand = (side.latency.block_times_s for side in sides)  # type: ignore[union-attr]
    return (list(base), list(cand)) if base and cand else None


def _judge(settings: dict[str, Any]) -> Judge | None:
    try:
        return Judge(
            **{
                name: settings[key]
                for name, key in _JUDGE_KEYS.items()
                if key in settings or name not in _OPTIONAL
            }
        )
    except (KeyError, TypeError, ValueError):
        return None


def _same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=RTOL, abs_tol=0.0)


def recheck_saved(comparison: BenchmarkComparison, where: str) -> str | None:
    """``None`` when every recorded ``latency.warmed`` delta follows from the recorded blocks;
    the reason when it cannot be recomputed (no blocks, no settings). ``ValueError`` when a
    recorded delta differs from its recomputation (an edited or damaged file)."""
    recorded = [d for d in comparison.deltas if d.metric == "latency.warmed"]
    if not recorded:
        return None
    blocks, judge = _blocks(comparison), _judge(comparison.settings)
    if blocks is None or judge is None:
        missing = "raw block times" if blocks is None else "judge settings"
        return (
            f"{where} records no {missing} to recompute its latency delta from; the gate "
            "decides only on what it can recompute"
        )
    paired = bool(comparison.settings.get("paired_bootstrap"))
    if paired and len(blocks[0]) != len(blocks[1]):
        raise ValueError(
            f"{where}: paired rounds with {len(blocks[0])} and {len(blocks[1])} blocks"
        )
    for delta in recorded:
        if delta.method.endswith("_paired_median"):  # an interleaved run: the paired rule
            if comparison.interleaved_rounds is None:
                return f"{where} records no interleaved rounds to recompute its latency delta"
            run = run_from_record(*blocks, comparison.interleaved_rounds)
            host = comparison.baseline.provenance.host if comparison.baseline else None
            method = delta.method.removesuffix("_paired_median")
            fresh = paired_deltas(run, judge, method, host).latency
            older = _judged_before_loaded_rule(delta, fresh, where)
            if older is not None:
                return older
        else:
            method = delta.method.removesuffix("_lower_decile")
            fresh, _ = latency_delta(*blocks, judge, paired=paired, method=method)
        _refuse_if_edited(delta, fresh, where)
    return None


def _judged_before_loaded_rule(
    delta: PerformanceDelta, fresh: PerformanceDelta, where: str
) -> str | None:
    """A comparison saved before the loaded-host rule (docs/comparison.md, "Large effects on
    a loaded host"): its busy-host row says inconclusive where the rule now gives a verdict
    from the same numbers. Not an edit: the gate keeps the recorded row (it cannot verify)
    and says how to apply the rule."""
    same = (
        _same(delta.ratio, fresh.ratio)
        and _same(delta.ci_low, fresh.ci_low)
        and _same(delta.ci_high, fresh.ci_high)
    )
    if not (same and delta.verdict == "inconclusive" and fresh.verdict in ("slower", "faster")):
        return None
    if not (fresh.reason or "").startswith("loaded host"):
        return None
    return (
        f"{where} was judged before the loaded-host rule: its row is inconclusive, the rule "
        f"now gives {fresh.verdict} from the same rounds; compare the reports again to apply it"
    )


def _refuse_if_edited(delta: PerformanceDelta, fresh: PerformanceDelta, where: str) -> None:
    kept = delta.verdict in ("withheld", "not_comparable")  # set after judging, on purpose
    same = (
        _same(delta.ratio, fresh.ratio)
        and _same(delta.ci_low, fresh.ci_low)
        and _same(delta.ci_high, fresh.ci_high)
        and (kept or delta.verdict == fresh.verdict)
    )
    if not same:
        raise ValueError(
            f"{where}: its latency.warmed delta does not follow from its own block times "
            f"(recorded ratio {delta.ratio!r}, CI [{delta.ci_low!r}, {delta.ci_high!r}], "
            f"verdict {delta.verdict!r}; recomputed ratio {fresh.ratio!r}, CI "
            f"[{fresh.ci_low!r}, {fresh.ci_high!r}], verdict {fresh.verdict!r}): the file was "
            "edited or damaged"
        )
