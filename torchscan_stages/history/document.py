"""The history report: a versioned report kind (``report.history``) and its JSON file."""

from __future__ import annotations

import math
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..provenance import build_provenance
from ..report import save_report
from ..report.history import HistoryReport
from .detect import Step
from .series import History

HISTORY_KIND = "history"


def history_document(
    history: History, steps: list[Step], settings: dict[str, Any] | None = None
) -> HistoryReport:
    """The history report: commits, every series with its points, segments and steps."""
    series = []
    for s in history.series:
        series.append(
            {
                "metric": s.metric,
                "stage": s.stage,
                "name": s.name,
                "unit": s.unit,
                "points": [{k: v for k, v in asdict(p).items() if k != "key"} for p in s.points],
                "segments": [asdict(g) for g in s.segments],
                "steps": [asdict(step) for step in s.steps],
            }
        )
    document = {
        "provenance": build_provenance(include_runtime=False),
        "repo": history.repo,
        "rev_range": history.rev_range,
        "settings": dict(settings or {}),
        "reports_read": history.reports_read,
        "range_note": history.range_note,
        "commits": [asdict(c) for c in history.commits],
        "series": series,
        "steps": [asdict(step) for step in steps],
    }
    return HistoryReport.model_validate(finite(document))


def finite(value: Any) -> Any:
    """``value`` with every non-finite float made None: the report is strict JSON (a
    reader in another language gets no bare ``NaN``), and a step whose interval overflowed
    says "unknown", never ``Infinity``."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def write_history_json(report: HistoryReport, path: str | os.PathLike[str]) -> Path:
    """Atomic write in the reports' compact form (``load_report`` reads it back)."""
    return save_report(report, path)


__all__ = ["HISTORY_KIND", "finite", "history_document", "write_history_json"]
