"""One sweep report for any set of jobs: a failed job is listed as failed, never missing."""

from __future__ import annotations

from pathlib import Path

import pytest
from pipeline_children import crawl_sweep

from torchscan_stages.provenance import build_provenance
from torchscan_stages.report import load_report
from torchscan_stages.report.sweep import JobStatus, SweepJob, SweepSummary

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "launcher",
    [[], ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]],
    ids=["basic", "joblib"],  # joblib: the failure comes back from a worker process
)
def test_a_job_that_fails_mid_sweep_shows_as_failed_and_the_others_complete(
    tmp_path: Path, launcher: list[str]
) -> None:
    sweep_dir = tmp_path / "sweep"
    result = crawl_sweep(sweep_dir, *launcher, "crawl.mode=full,bogus,structure")
    assert result.returncode != 0  # the sweep as a whole reports the failure
    summary = load_report(sweep_dir / "sweep_summary.json").model_dump(mode="json")
    jobs = {row["job"]: row for row in summary["jobs"]}
    assert sorted(jobs) == ["0", "1", "2"]  # the failed job is listed, not missing
    assert [jobs[j]["status"] for j in ("0", "1", "2")] == ["completed", "failed", "completed"]
    assert "crawl.mode" in jobs["1"]["error"] and "bogus" in jobs["1"]["error"], jobs["1"]
    assert jobs["1"]["axes"] == {"crawl.mode": "bogus"} and jobs["1"]["reports"] == []
    for job in ("0", "2"):  # the jobs after the failure ran too
        report = load_report(sweep_dir / job / "reports" / "crawl.json")
        assert report.kind == "analysis"
        parameters = jobs[job]["metrics"]["crawl.totals.parameters"]
        assert parameters["status"] == "complete"
        assert parameters["value"] == report.totals.parameters.value  # type: ignore[union-attr]
        assert jobs[job]["provenance"]["env_hash"] == report.provenance.env_hash
    html = (sweep_dir / "sweep_summary.html").read_text()
    assert "<script" not in html and 'class="failed"' in html and "bogus" in html
    assert f"sweep summary: {sweep_dir / 'sweep_summary.html'} (3 jobs, 1 failed)" in result.stdout
    # one clean block: every failed job with its one-line error, after the summary line
    block = result.stdout.split("sweep summary: ", 1)[1].splitlines()[1:]
    assert block[0] == "1 failed job(s):", result.stdout
    assert block[1].startswith("  job 1 (crawl.mode=bogus): StageFailed: crawl: "), block
    assert "Traceback" not in result.stderr and "HYDRA_FULL_ERROR=1 for a" not in result.stderr
    assert result.stderr.count("crawl: invalid config: crawl.mode = 'bogus'") == 1  # said once


def _job(folder: Path, overrides: list[str], status: dict[str, str] | None) -> None:
    (folder / ".hydra").mkdir(parents=True)
    (folder / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    if status is not None:
        provenance = build_provenance(include_runtime=False)
        JobStatus(provenance=provenance, **status).save(folder / "job_status.json")


def test_summary_of_listed_folders_keeps_every_job_with_its_status(tmp_path: Path) -> None:
    import torch

    from torchscan_stages import crawl_module
    from torchscan_stages.pipeline.sweep import summarize_jobs

    _job(tmp_path / "a", ["threads=1", "seed=0"], {"status": "completed", "host": "h1"})
    report = crawl_module(torch.nn.Linear(3, 2), (3,))
    (tmp_path / "a" / "reports").mkdir()
    (tmp_path / "a" / "reports" / "crawl.json").write_text(report.model_dump_json())
    _job(tmp_path / "b", ["threads=2", "seed=0"], {"status": "failed", "error": "E: boom"})
    (tmp_path / "c").mkdir()  # named, but nothing ever ran there
    folders = [tmp_path / name for name in ("a", "b", "c")]
    summary = summarize_jobs(folders, tmp_path, title="t", listed=True).model_dump(mode="json")
    rows = {row["job"]: row for row in summary["jobs"]}
    assert {k: r["status"] for k, r in rows.items()} == {
        "a": "completed", "b": "failed", "c": "unknown",
    }  # fmt: skip
    assert rows["b"]["error"] == "E: boom" and "never finished" in rows["c"]["error"]
    parameters = rows["a"]["metrics"]["crawl.totals.parameters"]
    assert parameters["status"] == "complete" and parameters["value"] == 8  # 3*2 weights + 2
    assert rows["a"]["host"] == "h1" and rows["a"]["reports"] == ["a/reports/crawl.json"]
    html = (tmp_path / "sweep_summary.html").read_text()
    # only the varying axis is a column; seed=0 is the same in every job
    assert "<th>threads</th>" in html and "<th>seed</th>" not in html
    assert html.count('class="failed"') == 2 and "E: boom" in html  # b and c, both listed


def test_an_unreadable_report_fails_its_job_row_not_the_summary(tmp_path: Path) -> None:
    from torchscan_stages.pipeline.sweep import summarize_jobs

    _job(tmp_path / "a", ["threads=1"], {"status": "completed", "host": "h1"})
    (tmp_path / "a" / "reports").mkdir()
    broken = tmp_path / "a" / "reports" / "latency.json"
    broken.write_text("{nope")  # a report cut short
    summary = summarize_jobs([tmp_path / "a"], tmp_path, title="t", listed=True)
    (row,) = summary.jobs
    assert row.status == "failed" and row.error is not None
    assert str(broken) in row.error and "malformed JSON" in row.error


def test_the_failure_block_lists_every_failed_job_with_its_error() -> None:
    from torchscan_stages.pipeline.sweep import failure_block

    jobs = [
        SweepJob(job="0", status="completed", axes={"threads": "1"}),
        SweepJob(job="1", status="failed", axes={"threads": "2"}, error="E: boom"),
        SweepJob(job="2", status="unknown", error="no report and no job_status.json"),
    ]
    summary = SweepSummary(provenance=build_provenance(include_runtime=False), title="t", jobs=jobs)
    assert failure_block(summary) == [
        "2 failed job(s):",
        "  job 1 (threads=2): E: boom",
        "  job 2: no report and no job_status.json",
    ]
    assert failure_block(summary.model_copy(update={"jobs": jobs[:1]})) == []
