"""A multirun over serve.target_qps: its sweep page draws latency against the offered rate.

The job folders are written as a Hydra multirun of the serve stage leaves them (a report,
flat metrics, the overrides), from injected queues; the e2e tier runs the stage itself.
"""

from __future__ import annotations

import json
from pathlib import Path

from served_reports import served_sample

from torchscan_stages.pipeline.sweep import summarize_jobs
from torchscan_stages.serve.metrics import served_metrics


def test_a_target_qps_sweep_gives_latency_against_offered_load(tmp_path: Path) -> None:
    jobs = []
    for number, qps in enumerate((100.0, 200.0, 400.0)):
        job = tmp_path / str(number)
        (job / "reports").mkdir(parents=True)
        (job / "metrics").mkdir()
        (job / ".hydra").mkdir()
        report = served_sample(400, qps, seed=number)
        report.save(job / "reports" / "serve.json")
        flat = {k: v for k, v in served_metrics(report).items() if v is not None}
        (job / "metrics" / "serve.json").write_text(json.dumps(flat))
        overrides = f"- serve=server\n- serve.target_qps={qps:g}\n"
        (job / ".hydra" / "overrides.yaml").write_text(overrides)
        jobs.append(job)
    summary = summarize_jobs(jobs, tmp_path, title="serve sweep")
    rows = summary.jobs
    assert [row.axes["serve.target_qps"] for row in rows] == ["100", "200", "400"]
    # every row carries the served percentiles; p99 grows with the offered load (M/D/1,
    # D = 2 ms: rho 0.2, 0.4, 0.8)
    p99 = [row.metrics["serve.latency.p99"].value for row in rows]
    assert p99 == sorted(p99) and p99[2] > 2 * p99[0]
    page = (tmp_path / "sweep_summary.html").read_text(encoding="utf-8")
    assert "serve.latency.p99 (s)" in page and ">serve.target_qps<" in page
