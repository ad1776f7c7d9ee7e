"""The history report: one JSON document (with provenance) and its offline HTML page."""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict
from typing import Any

from ..provenance import build_provenance
from ..report import atomic_write_text
from .detect import Step
from .series import History

HISTORY_KIND = "history"
HISTORY_SCHEMA = 1


def history_document(
    history: History, steps: list[Step], settings: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A plain JSON document: commits, every series with its points, segments and steps."""
    series = []
    for s in history.series:
        points = []
        for p in s.points:
            item = {k: v for k, v in asdict(p).items() if k != "key" and v is not None}
            points.append(item)
        series.append(
            {
                "metric": s.metric,
                "stage": s.stage,
                "name": s.name,
                "unit": s.unit,
                "points": points,
                "segments": [asdict(g) for g in s.segments],
                "steps": [asdict(step) for step in s.steps],
            }
        )
    document = {
        "kind": HISTORY_KIND,
        "schema_version": HISTORY_SCHEMA,
        "provenance": build_provenance(include_runtime=False).model_dump(mode="json"),
        "repo": history.repo,
        "rev_range": history.rev_range,
        "settings": dict(settings or {}),
        "reports_read": history.reports_read,
        "range_note": history.range_note,
        "commits": [asdict(c) for c in history.commits],
        "series": series,
        "steps": [asdict(step) for step in steps],
    }
    return finite(document)  # type: ignore[no-any-return]


def finite(value: Any) -> Any:
    """``value`` with every non-finite float made None: the document is strict JSON (a
    reader in another language gets no bare ``NaN``), and a step whose interval overflowed
    says "unknown", never ``Infinity``."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def write_history_json(document: dict[str, Any], path: str | os.PathLike[str]) -> None:
    """Atomic write (the report helpers): a reader never sees half a history."""
    text = json.dumps(document, indent=1, sort_keys=False, allow_nan=False)
    atomic_write_text(path, text + "\n")


__all__ = ["HISTORY_KIND", "HISTORY_SCHEMA", "history_document", "write_history_json"]
