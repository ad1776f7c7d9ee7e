"""A sweep job's outcome beside its reports (``job_status.json``), and the multirun's count.

Kept apart from ``sweep.py`` (which renders the summary page) so the stage runner can record
a failed job without importing render.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Literal

JOB_STATUS = "job_status.json"


def write_job_status(
    output_dir: Path, status: Literal["completed", "failed"], error: BaseException | None
) -> None:
    """One job's outcome beside its reports (a ``job_status`` report), so a failed job is
    never missing. Its provenance is the job's run context, where the stage set one."""
    from ..provenance import build_provenance
    from ..report import save_report
    from ..report.sweep import JobStatus
    from .hostlock import last_share

    message = None
    if error is not None:
        lines = str(error).strip().splitlines() or [type(error).__name__]
        message = f"{type(error).__name__}: {lines[0]}"
    document = JobStatus(
        provenance=build_provenance(include_runtime=False),
        status=status,
        error=message,
        host=socket.gethostname(),
        timing_jobs_on_host=last_share(),
    )
    save_report(document, output_dir / JOB_STATUS)


_last_failures: list[int] = []


def record_sweep_failures(count: int) -> None:
    """Called by the sweep callback once it summarised a multirun in this process."""
    _last_failures.append(count)


def last_sweep_failures() -> int | None:
    """Failed jobs of the latest multirun summarised in this process (None: no multirun)."""
    return _last_failures[-1] if _last_failures else None


def recorded_failure(output_dir: Path) -> bool:
    """The stage itself recorded this job as failed (runner._job_failed): keep that."""
    from ..report import load_report
    from ..report.sweep import JobStatus

    path = output_dir / JOB_STATUS
    if not path.exists():
        return False
    try:
        document = load_report(path)
    except ValueError:  # damaged: the summary's row names it
        return False
    return isinstance(document, JobStatus) and document.status == "failed"
