"""A sweep job's outcome beside its reports (``job_status.json``), and the multirun's count.

Kept apart from ``sweep.py`` (which renders the summary page) so the stage runner can record
a failed job without importing render.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

JOB_STATUS = "job_status.json"


def write_job_status(output_dir: Path, status: str, error: BaseException | None) -> None:
    """One job's outcome beside its reports, so a failed job is never missing."""
    from ..report import atomic_write_text
    from .hostlock import last_share

    document: dict[str, Any] = {"status": status, "host": socket.gethostname()}
    if error is not None:
        lines = str(error).strip().splitlines() or [type(error).__name__]
        document["error"] = f"{type(error).__name__}: {lines[0]}"
    share = last_share()
    if share is not None:
        document["timing_jobs_on_host"] = share
    atomic_write_text(output_dir / JOB_STATUS, json.dumps(document, indent=2) + "\n")


_last_failures: list[int] = []


def record_sweep_failures(count: int) -> None:
    """Called by the sweep callback once it summarised a multirun in this process."""
    _last_failures.append(count)


def last_sweep_failures() -> int | None:
    """Failed jobs of the latest multirun summarised in this process (None: no multirun)."""
    return _last_failures[-1] if _last_failures else None


def recorded_failure(output_dir: Path) -> bool:
    """The stage itself recorded this job as failed (runner._job_failed): keep that."""
    path = output_dir / JOB_STATUS
    document = json.loads(path.read_text(encoding="utf-8")) if path.exists() else None
    return isinstance(document, dict) and document.get("status") == "failed"
