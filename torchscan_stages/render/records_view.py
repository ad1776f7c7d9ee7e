"""The pipeline's record kinds on a page: the environment and source fingerprints, a sweep
job's outcome and a sweep summary. Each is a key/value table (the summary: its jobs table
and charts), so that every file the pipeline writes renders like any report."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeAlias

from markupsafe import Markup

from ..report import Status
from ..report.fingerprint import EnvironmentReport, SourcesReport
from ..report.sweep import JobStatus, SweepSummary
from .format import DASH
from .sweep_view import SWEEP_CSS, sweep_body

PipelineRecord: TypeAlias = EnvironmentReport | SourcesReport | JobStatus | SweepSummary
RECORDS = (EnvironmentReport, SourcesReport, JobStatus, SweepSummary)
LABELS = {
    "environment": "Environment fingerprint",
    "sources": "Source fingerprints",
    "job_status": "Sweep job outcome",
    "sweep_summary": "Sweep summary",
}


@dataclass(slots=True)
class RecordView:
    heading: str
    note: str = ""
    rows: list[tuple[str, str]] = field(default_factory=list)
    body: Markup = field(default_factory=Markup)


def record_title(report: PipelineRecord) -> str:
    if isinstance(report, EnvironmentReport):
        return f"env_hash {report.provenance.env_hash}"
    if isinstance(report, SourcesReport):
        return ", ".join(f"{k}: {v.module}" for k, v in report.sources.items()) or "no source"
    if isinstance(report, JobStatus):
        return f"job {report.status}" + (f" on {report.host}" if report.host else "")
    return report.title


def record_status(report: PipelineRecord) -> Status:
    """A job that failed, or a summary with no completed job, has nothing to show."""
    if isinstance(report, JobStatus):
        return "complete" if report.status == "completed" else "unavailable"
    if isinstance(report, SweepSummary):
        if not report.failed:
            return "complete"
        return "partial" if len(report.failed) < len(report.jobs) else "unavailable"
    if isinstance(report, SourcesReport) and any(s.skipped for s in report.sources.values()):
        return "partial"  # some files were left out of the hash
    return "complete"


def record_view(report: PipelineRecord) -> RecordView:
    if isinstance(report, EnvironmentReport):
        return RecordView(
            "What the hash covers",
            "The provenance below is the whole content: every report repeats its env_hash.",
        )
    if isinstance(report, SourcesReport):
        rows = [
            (f"{name} ({entry.target})", entry.sha256 or entry.source or DASH)
            for name, entry in report.sources.items()
        ]
        rows += [
            (f"{name}: skipped", note)
            for name, entry in report.sources.items()
            for note in entry.skipped
        ]
        return RecordView("Hashed sources", "sha256 of each package's .py files", rows)
    if isinstance(report, JobStatus):
        rows = [("status", report.status), ("error", report.error or DASH)]
        rows += [("host", report.host or DASH)]
        shared = report.timing_jobs_on_host
        rows += [("timing jobs on host", DASH if shared is None else str(shared))]
        return RecordView("Outcome", rows=rows)
    body = Markup("<style>{}</style>").format(Markup(SWEEP_CSS)) + sweep_body(report)
    return RecordView("Jobs", body=body)
