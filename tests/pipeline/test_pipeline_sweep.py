"""A Hydra multirun over precision and threads: one report per job, one summary per sweep."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pipeline_children import crawl_sweep

from torchscan_stages.report import BenchmarkReport, load_report

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_multirun_writes_a_report_per_job_and_summarises_only_that_sweep(
    tmp_path: Path,
) -> None:
    sweep_dir = tmp_path / "sweep"
    stale = sweep_dir / "99" / "reports"
    stale.mkdir(parents=True)
    (stale / "latency.json").write_text("{}")  # an older job in the same folder
    env = {k: v for k, v in os.environ.items() if not k.startswith("DVC_")}
    env["TORCHSCAN_TIMING_LOCK"] = str(tmp_path / "lock")  # this test's host lock only
    result = subprocess.run(
        [
            sys.executable, "-m", "torchscan_stages.stages.latency", "-m",
            "precision=fp32,bf16", "threads=1", "latency.warmup=0",
            "latency.min_run_time=0.02", f"hydra.sweep.dir={sweep_dir}",
        ],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    reports = sorted(sweep_dir.glob("[0-9]/reports/latency.json"))
    assert len(reports) == 2  # 2 precisions x 1 thread count
    loaded = [load_report(path) for path in reports]
    assert all(isinstance(r, BenchmarkReport) for r in loaded)
    precisions = {r.execution.precision for r in loaded}  # type: ignore[union-attr]
    assert len(precisions) == 2, precisions
    for report in loaded:  # the basic launcher runs jobs one by one: each was alone
        shares = [d for d in report.diagnostics if d.code == "timing_host_share"]
        assert [d.count for d in shares] == [1], shares  # 1 = itself; no other timing job
    summary = load_report(sweep_dir / "sweep_summary.json").model_dump(mode="json")
    assert sorted(row["job"] for row in summary["jobs"]) == ["0", "1"]  # not the stale "99"
    html = (sweep_dir / "sweep_summary.html").read_text()
    assert "<script" not in html and "Sweep" in html
    # the multirun says where its summary is; each job's log holds the stage's result line
    assert f"sweep summary: {sweep_dir / 'sweep_summary.html'} (2 jobs)" in result.stdout
    for job in ("0", "1"):
        log = (sweep_dir / job / "latency.log").read_text(encoding="utf-8")
        assert "latency: warmed median" in log and "reports/latency.json" in log, log


@pytest.mark.parametrize(
    "launcher",
    [
        ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"],
        ["hydra/launcher=submitit_local"],  # the SLURM launcher's local executor
    ],
    ids=["joblib", "submitit_local"],
)
def test_sweep_through_launcher_plugins(tmp_path: Path, launcher: list[str]) -> None:
    sweep_dir = tmp_path / "sweep"
    result = crawl_sweep(sweep_dir, *launcher, "seed=1,2")  # crawl reads seed, not threads
    assert result.returncode == 0, result.stderr[-2000:]
    reports = sorted(sweep_dir.glob("[0-9]/reports/crawl.json"))
    assert [load_report(path).kind for path in reports] == ["analysis", "analysis"]
    summary = load_report(sweep_dir / "sweep_summary.json").model_dump(mode="json")
    assert sorted((row["job"], row["seed"]) for row in summary["jobs"]) == [("0", 1), ("1", 2)]
