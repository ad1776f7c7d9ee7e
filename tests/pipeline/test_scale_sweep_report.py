"""One sweep report for any set of jobs: a failed job is listed as failed, never missing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from torchscan_stages.report import load_report

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_a_job_that_fails_mid_sweep_shows_as_failed_and_the_others_complete(
    tmp_path: Path,
) -> None:
    sweep_dir = tmp_path / "sweep"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DVC_")}
    result = subprocess.run(
        [
            sys.executable, "-m", "torchscan_stages.stages.crawl", "-m",
            "crawl.mode=full,bogus,structure", f"hydra.sweep.dir={sweep_dir}",
        ],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode != 0  # the sweep as a whole reports the failure
    summary = json.loads((sweep_dir / "sweep_summary.json").read_text())
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
