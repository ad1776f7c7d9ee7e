"""The pipeline's record kinds (environment, sources, job_status, sweep_summary), made by
the package's own writers in a temporary folder and read back: what the codec and render
tests use."""

from __future__ import annotations

import tempfile
from pathlib import Path

from torch import nn

from torchscan_stages import crawl_module
from torchscan_stages.pipeline.job_status import write_job_status
from torchscan_stages.pipeline.sources import sources_document
from torchscan_stages.pipeline.sweep import summarize_jobs
from torchscan_stages.provenance import environment_provenance
from torchscan_stages.report import load_report
from torchscan_stages.report.fingerprint import EnvironmentReport, SourcesReport
from torchscan_stages.report.sweep import JobStatus, SweepSummary

# a user package's target (this file's module: hashed) and the standard library's (not hashed)
PARAMS = {"model": {"_target_": "record_samples.tiny"}, "input": {"_target_": "json.loads"}}


def tiny() -> nn.Module:
    return nn.Sequential(nn.Linear(4, 3))


def environment_sample() -> EnvironmentReport:
    return EnvironmentReport(provenance=environment_provenance())


def sources_sample() -> SourcesReport:
    return SourcesReport(provenance=environment_provenance(), sources=sources_document(PARAMS))


def job_status_sample(error: str = "out of memory") -> JobStatus:
    with tempfile.TemporaryDirectory() as folder:
        write_job_status(Path(folder), "failed", RuntimeError(f"{error}\nsecond line"))
        found = load_report(Path(folder) / "job_status.json")
    assert isinstance(found, JobStatus)
    return found


def sweep_sample(title: str = "tiny sweep") -> SweepSummary:
    """Two jobs of a threads sweep: one completed (a crawl report, its metrics), one failed."""
    with tempfile.TemporaryDirectory() as name:
        root = Path(name)
        for job, threads in (("0", 1), ("1", 2)):
            folder = root / job
            (folder / ".hydra").mkdir(parents=True)
            (folder / ".hydra" / "overrides.yaml").write_text(f"- threads={threads}\n")
            if job == "0":
                crawl_module(tiny(), (4,)).save(folder / "reports" / "crawl.json")
                (folder / "metrics").mkdir()
                (folder / "metrics" / "crawl.json").write_text('{"parameters": 15}\n')
                write_job_status(folder, "completed", None)
            else:
                write_job_status(folder, "failed", MemoryError("out of memory"))
        summarize_jobs([root / "0", root / "1"], root, title=title)
        found = load_report(root / "sweep_summary.json")
    assert isinstance(found, SweepSummary)
    return found
