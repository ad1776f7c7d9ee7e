"""The sweep summary survives one damaged job folder: that row fails, naming the file."""

from __future__ import annotations

from pathlib import Path

import pytest
from torch import nn

from torchscan_stages import crawl_module
from torchscan_stages.pipeline.sweep import summarize_jobs
from torchscan_stages.report import load_report


def _good_job(folder: Path, name: str = "crawl.json") -> None:
    (folder / "reports").mkdir(parents=True)
    crawl_module(nn.Sequential(nn.Linear(4, 3)), (4,)).save(folder / "reports" / name)


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        (lambda j: (j / "job_status.json").write_text('{"status": "compl'), "job_status.json: "
         "malformed JSON"),
        (lambda j: (j / "job_status.json").write_text("[1, 2]"), "job_status.json: not a "
         "torchscan_stages report (top level is not an object)"),
        (lambda j: (j / "job_status.json").write_text('{"status": "completed"}'),
         "job_status.json: not a torchscan_stages report (no 'kind'"),
        (lambda j: (j / "metrics").mkdir() or (j / "metrics" / "crawl.json").write_text(
            '{"flops": "many"}'), "metrics/crawl.json: 'flops' is not a number"),
        (lambda j: ((j / "metrics").mkdir(), (j / "metrics" / "crawl.json").write_text("{nope")),
         "metrics/crawl.json: unreadable (JSONDecodeError"),
        (lambda j: ((j / ".hydra").mkdir(), (j / ".hydra" / "overrides.yaml").write_text(
            "- a=1\n  b: [")), ".hydra/overrides.yaml: unreadable ("),
        (lambda j: ((j / ".hydra").mkdir(), (j / ".hydra" / "overrides.yaml").write_text(
            "a: 1\n")), ".hydra/overrides.yaml: expected a YAML list, got dict"),
        (lambda j: (j / "reports" / "flops.json").write_text('{"kind": "flo'),
         "flops.json: malformed JSON"),
    ],
    ids=["status-truncated", "status-list", "status-not-a-report", "metrics-not-a-number",
         "metrics-malformed", "overrides-malformed",
         "overrides-not-a-list", "report-truncated"],
)  # fmt: skip
def test_one_bad_job_folder_fails_only_its_row(tmp_path: Path, damage, expected: str) -> None:
    good, bad = tmp_path / "good", tmp_path / "bad"
    _good_job(good)
    _good_job(bad)
    damage(bad)
    summary = summarize_jobs([good, bad], tmp_path, title="t", listed=True)
    rows = {row.job: row for row in summary.jobs}
    assert rows["good"].status == "completed" and rows["good"].error is None
    assert rows["bad"].status == "failed"
    assert rows["bad"].error is not None and expected in rows["bad"].error, rows["bad"].error
    # the summary is written whole, and reads back as the same report
    assert load_report(tmp_path / "sweep_summary.json") == summary
    assert "bad" in (tmp_path / "sweep_summary.html").read_text(encoding="utf-8")


def test_a_job_whose_only_report_is_compact_is_finished(tmp_path: Path) -> None:
    # reports/crawl.json.gz (the compact form) once showed as "never finished"
    job = tmp_path / "j"
    _good_job(job, "crawl.json.gz")
    (row,) = summarize_jobs([job], tmp_path, title="t", listed=True).jobs
    assert row.status == "completed" and row.error is None
    assert row.reports == ["j/reports/crawl.json.gz"]
    assert "crawl.totals.module_flops" in row.metrics  # keyed crawl.*, not crawl.json.*


def test_the_sweep_cli_refuses_a_file_as_its_output_folder_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from torchscan_stages.pipeline.sweep import main

    (tmp_path / "afile").write_text("notes\n")
    (tmp_path / "job").mkdir()
    assert main([str(tmp_path / "afile"), str(tmp_path / "job")]) == 2
    assert main([str(tmp_path / "afile" / "sub"), str(tmp_path / "job")]) == 2  # under a file
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"sweep: output_dir {tmp_path / 'afile'} is not a folder (a file is there)",
        f"sweep: output_dir {tmp_path / 'afile' / 'sub'} is not a folder (Not a directory)",
    ]
    assert (tmp_path / "afile").read_text() == "notes\n"  # left as it was
