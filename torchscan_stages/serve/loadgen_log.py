"""Reading what LoadGen wrote: its detail log (results, validity) and its trace (per sample).

LoadGen's detail log is one ``:::MLLOG {json}`` line per fact; the last value of a key wins.
Its trace (Chrome trace events, one per line) holds one ``Sample`` begin event per sample
with LoadGen's own latency (``complete_ns``: scheduled arrival to completion) and issue delay
(``issue_start_ns``: scheduled arrival to the SUT's IssueQuery); ``ts`` (microseconds from
the start) is the scheduled arrival. Pure functions over text, tested on written samples.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from ..report import ServedValidity

PREFIX = ":::MLLOG "


@dataclass(frozen=True, slots=True)
class TraceSample:
    """One sample as LoadGen traced it (its times in ns from the test's start)."""

    sequence: int
    index: int
    scheduled_ns: int
    issue_delay_ns: int
    latency_ns: int


@dataclass(frozen=True)
class DetailLog:
    values: dict[str, Any]
    errors: list[str]
    warnings: list[str]


def parse_detail(text: str) -> DetailLog:
    """Key -> value of every MLLOG line (non-finite numbers dropped), errors and warnings."""
    values: dict[str, Any] = {}
    errors: list[str] = []
    warnings: list[str] = []
    for line in text.splitlines():
        if not line.startswith(PREFIX):
            continue
        try:
            entry = json.loads(line[len(PREFIX) :])
        except json.JSONDecodeError:
            continue
        key, value = entry.get("key"), entry.get("value")
        if not isinstance(key, str):
            continue
        meta = entry.get("metadata") or {}
        if meta.get("is_error"):
            errors.append(f"{key}: {value}")
        elif meta.get("is_warning"):
            warnings.append(f"{key}: {value}")
        if isinstance(value, float) and not math.isfinite(value):
            continue
        values[key] = value
    return DetailLog(values, errors, warnings)


def parse_trace(text: str) -> list[TraceSample]:
    """The per-sample records of a LoadGen trace, in sample sequence order.

    Read line by line (LoadGen writes one event per line): its trace is not always valid JSON
    as a whole (some of its detail events quote their keys twice), its sample events are.
    """
    found = []
    for line in text.splitlines():
        if not line.startswith('{"name":"Sample"'):
            continue
        event = json.loads(line.rstrip().rstrip(","))
        if event.get("ph") != "b":
            continue
        args = event["args"]
        found.append(
            TraceSample(
                sequence=int(args["sample_seq"]),
                index=int(args["sample_idx"]),
                scheduled_ns=round(float(event["ts"]) * 1000),
                issue_delay_ns=int(args["issue_start_ns"]),
                latency_ns=int(args["complete_ns"]),
            )
        )
    found.sort(key=lambda sample: sample.sequence)
    return found


def loadgen_results(values: dict[str, Any]) -> dict[str, Any]:
    """LoadGen's conclusions (``result_*``, early stopping, error count) and the effective
    settings it ran with (``effective_*``), as it wrote them (scalars only)."""
    keep = ("result_", "early_stopping_", "num_errors", "loadgen_version", "effective_")
    return {
        key: value
        for key, value in values.items()
        if key.startswith(keep) and isinstance(value, (int, float, str, bool))
    }


def _flag(values: dict[str, Any], key: str) -> bool | None:
    value = values.get(key)
    return value if isinstance(value, bool) else None


def validity(detail: DetailLog) -> ServedValidity:
    """LoadGen's verdict and its reasons, read from its detail log."""
    values = detail.values
    verdict = values.get("result_validity")
    reasons = [
        part.strip() + "."
        for part in str(values.get("result_invalid_reason", "")).split(". ")
        if part.strip(" .")
    ]
    if values.get("early_stopping_met") is False:
        reasons.append("Early stopping not satisfied: too few queries for the percentile asked.")
    stopping = [
        str(values[key]).strip()
        for key in (
            "early_stopping_result",
            "early_stopping_ttft_result",
            "early_stopping_tpot_result",
        )
        if values.get(key)
    ]
    return ServedValidity(
        verdict=verdict if verdict in ("VALID", "INVALID") else None,
        perf_constraints_met=_flag(values, "result_perf_constraints_met"),
        min_duration_met=_flag(values, "result_min_duration_met"),
        min_queries_met=_flag(values, "result_min_queries_met"),
        early_stopping_met=_flag(values, "early_stopping_met"),
        reasons=reasons,
        early_stopping=stopping,
        errors=list(detail.errors),
    )
