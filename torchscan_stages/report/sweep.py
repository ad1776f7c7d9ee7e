"""A sweep's two files as versioned reports: each job's ``job_status``, the ``sweep_summary``.

``job_status.json`` is written in a job's folder when the job ends (completed or failed,
with its error line), so a failed job is never missing from the summary.
``sweep_summary.json`` has one row per job of a sweep, failed jobs included; it is written by
``torchscan_stages.pipeline.sweep`` (a Hydra multirun's callback, a DVC ``matrix:``
pipeline's summary stage, or DVC experiments) and read back by ``load_report``, so the sweep
page renders again from the file and a damaged one is refused in one line. The same file is
DVC plots data: each row also carries its job's flat metrics values as top-level columns
(``latency_warmed_median_s``: metrics file ``latency``, key ``warmed_median_s``; an
underscore, since a dot means a nested field to vega-lite), the only extra keys a row
accepts, and only as numbers.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, StrictInt

from .metric import Status, StrictNumber, _Model
from .models import _Report

FlatValue = StrictNumber | None  # a committed metrics value (complete numbers only), or null


class SweepSpread(_Model):
    """The warmed latency's spread over its blocks (from the report's latency stats)."""

    q1: float | None = None
    q3: float | None = None
    iqr: float | None = None
    blocks: StrictInt | None = None


class SweepMetric(_Model):
    """One number of a job, as its report or metrics file states it (status kept)."""

    status: Status
    value: StrictNumber | None = None
    known_value: StrictNumber | None = None
    unit: str = ""
    scope: str | None = None
    spread: SweepSpread | None = None
    caveats: list[str] = Field(default_factory=list)  # the warnings the figure rests on


class JobProvenance(_Model):
    """Where a job's numbers came from: its first report's environment and commit, or the
    DVC experiment's commit and time."""

    env_hash: str | None = None
    torch_version: str | None = None
    git_commit: str | None = None
    git_dirty: bool | None = None
    timestamp: str | None = None


class SweepJob(_Model):
    """One job: its swept settings, outcome, numbers and reports. ``status`` is
    ``completed``, ``failed``, ``unknown`` (no report, no status) or a DVC experiment
    state (``queued``, ``running``)."""

    # flat metrics columns for DVC plots (see the module docstring): numbers only
    model_config = ConfigDict(extra="allow")
    __pydantic_extra__: dict[str, FlatValue] = Field(init=False)  # type: ignore[assignment]

    job: str
    status: str
    error: str | None = None
    overrides: list[str] | None = None  # Hydra's task overrides, as given
    axes: dict[str, str] = Field(default_factory=dict)  # the swept settings, by key
    host: str | None = None
    timing_jobs_on_host: StrictInt | None = None
    metrics: dict[str, SweepMetric] = Field(default_factory=dict)
    provenance: JobProvenance | None = None
    reports: list[str] = Field(default_factory=list)
    # the workload the job ran, from its reports' execution records and run context
    model: str | None = None
    input: str | None = None
    device: str | None = None
    precision: str | None = None
    threads: StrictInt | None = None
    seed: StrictInt | None = None


class JobStatus(_Report):
    """One sweep job's outcome, beside its reports (``job_status.json``)."""

    kind: Literal["job_status"] = "job_status"
    status: Literal["completed", "failed"]
    error: str | None = None  # ``Type: first line`` of a failed job's error
    host: str | None = None  # where the job ran (the launcher may spread jobs over hosts)
    timing_jobs_on_host: StrictInt | None = None  # timing jobs that shared the host (hostlock)


class SweepSummary(_Report):
    """Every job of one sweep in order, and the timings that overlapped on one host."""

    kind: Literal["sweep_summary"] = "sweep_summary"
    title: str
    note: str = ""
    jobs: list[SweepJob] = Field(default_factory=list)
    # report pairs whose timings overlapped on one host: each measured the other's load too
    overlapping_timings: list[tuple[str, str]] = Field(default_factory=list)
    warning: str | None = None

    @property
    def failed(self) -> list[SweepJob]:
        """The jobs that did not complete."""
        return [job for job in self.jobs if job.status != "completed"]


__all__ = ["JobProvenance", "JobStatus", "SweepJob", "SweepMetric", "SweepSpread", "SweepSummary"]
