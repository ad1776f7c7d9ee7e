"""A latency's line says what it is: a one-block or backstopped median is never a bare
"complete" on the stage line, the text summary, the index or the sweep page."""

from __future__ import annotations

from pathlib import Path

from simulated_clock import SimulatedClock

from torchscan_stages.measure.latency import measure_latency
from torchscan_stages.pipeline.feedback import figure
from torchscan_stages.render import render_index
from torchscan_stages.render.caveats import latency_caveats
from torchscan_stages.render.text import benchmark_summary
from torchscan_stages.report import BenchmarkReport
from torchscan_stages.report.sweep import SweepJob, SweepSummary


def _one_block(sim_clock: SimulatedClock) -> BenchmarkReport:
    # each call costs 0.2 s and max_run_time is 0.1 s: one block, fewer than min_blocks
    return measure_latency(
        sim_clock.workload(0.2),
        options={"warmup": 0.0, "min_run_time": 0.05, "max_run_time": 0.1, "clock": sim_clock},
    )


def _minimum(report: BenchmarkReport) -> int:
    assert report.latency is not None
    return int(report.latency.settings["min_blocks"])


def _steady(sim_clock: SimulatedClock) -> BenchmarkReport:
    # 1 ms per call, 0.5 s of timing: many blocks, IQR 0 on an exact clock, no warning
    return measure_latency(
        sim_clock.workload(0.001),
        options={"warmup": 0.0, "min_run_time": 0.5, "max_run_time": 1.0, "clock": sim_clock},
    )


def test_one_block_is_complete_with_warnings_on_the_stage_line(sim_clock: SimulatedClock) -> None:
    report = _one_block(sim_clock)
    lat = report.latency
    assert lat is not None and lat.stats is not None and lat.stats.blocks == 1
    assert lat.warmed.status == "complete"  # the median was measured: complete-with-warning
    minimum = _minimum(report)
    assert latency_caveats(report) == [f"1 block(s) < min {minimum}"]
    line = figure("warmed median", lat.warmed, latency_caveats(report))
    # 0.2 s per call
    assert line == f"warmed median 200 ms (complete with warnings: 1 block(s) < min {minimum})"
    assert "(complete)" not in line


def test_a_backstop_is_named_too() -> None:
    # a clock that never moves: the wall-clock backstop ends the timing
    report = measure_latency(
        lambda: None,
        options={"warmup": 0.0, "min_run_time": 0.01, "max_run_time": 0.05, "clock": lambda: 0.0},
    )
    assert "stopped by the timing backstop" in latency_caveats(report)


def test_a_clean_measurement_has_no_caveat(sim_clock: SimulatedClock) -> None:
    report = _steady(sim_clock)
    assert latency_caveats(report) == []
    assert report.latency is not None
    line = figure("warmed median", report.latency.warmed, [])
    assert line.endswith("1.00 ms (complete)")  # 1 ms per call


def test_text_summary_says_it_on_the_warmed_and_throughput_lines(
    sim_clock: SimulatedClock,
) -> None:
    report = _one_block(sim_clock)
    text = benchmark_summary(report)
    warned = f"! complete with warnings: 1 block(s) < min {_minimum(report)}"
    lines = [line for line in text.splitlines() if "warmed latency" in line or "throughput" in line]
    assert len(lines) == 2 and all(warned in line for line in lines), text


def test_index_overview_and_status_block_carry_the_warning(
    sim_clock: SimulatedClock, tmp_path: Path
) -> None:
    report = _one_block(sim_clock)
    html = render_index([report], tmp_path / "index.html")
    note = f'<span class="hnote">with warnings: 1 block(s) &lt; min {_minimum(report)}</span>'
    assert html.count(note) >= 2  # overview row and the report's status block: warmed line
    assert "every headline number is complete." not in html
    assert "the notes beside them say what each rests on" in html


def test_sweep_page_shows_no_iqr_from_one_block(sim_clock: SimulatedClock, tmp_path: Path) -> None:
    from torchscan_stages.pipeline.job_status import write_job_status
    from torchscan_stages.pipeline.sweep import summarize_jobs

    for name, report in (("0", _one_block(sim_clock)), ("1", _steady(sim_clock))):
        folder = tmp_path / name
        (folder / ".hydra").mkdir(parents=True)
        (folder / ".hydra" / "overrides.yaml").write_text(f"- threads={int(name) + 1}\n")
        write_job_status(folder, "completed", None)
        report.save(folder / "reports" / "latency.json")
    summary = summarize_jobs([tmp_path / "0", tmp_path / "1"], tmp_path, title="t", listed=True)
    rows = {row.job: row for row in summary.jobs}
    minimum = _minimum(_one_block(SimulatedClock()))
    assert rows["0"].metrics["latency.warmed"].caveats == [f"1 block(s) < min {minimum}"]
    assert rows["1"].metrics["latency.warmed"].caveats == []
    html = (tmp_path / "sweep_summary.html").read_text(encoding="utf-8")
    assert f"200 ms ⚠ 1 block(s) &lt; min {minimum}" in html
    assert "200 ms (IQR" not in html  # one block's IQR of 0 s is not shown
    assert "1.00 ms (IQR " in html  # the steady job's spread is


def _summary(jobs: list[SweepJob]) -> SweepSummary:
    from torchscan_stages.provenance import build_provenance

    return SweepSummary(provenance=build_provenance(include_runtime=False), title="t", jobs=jobs)


def _throughput_job(
    name: str, threads: str, value: float | None, error: str | None = None
) -> SweepJob:
    """A sweep job as the sweep page reads it: completed with a throughput of ``value``, or
    (no value) failed with ``error`` and no metrics."""
    metric = {"status": "complete", "value": value, "known_value": value,
              "unit": "samples/s", "scope": "warmed_block_average"}  # fmt: skip
    return SweepJob.model_validate(
        {"job": name, "status": "completed" if value else "failed",
         "axes": {"threads": threads},
         "metrics": {"latency.throughput": metric} if value else {},
         "error": error})  # fmt: skip


def test_sweep_chart_fits_long_y_labels_and_keeps_failed_only_values_off_the_axis() -> None:
    from torchscan_stages.render.format import human
    from torchscan_stages.render.svg import TICK_CHAR_PX
    from torchscan_stages.render.sweep_view import sweep_page

    jobs = [_throughput_job("0", "1", 1200.0), _throughput_job("1", "2", 2100.0),
            _throughput_job("2", "bogus", None, "E: boom")]  # fmt: skip
    html = sweep_page(_summary(jobs))
    chart = html[html.index('<svg class="chart"') :]
    chart = chart[: chart.index("</svg>")]
    assert ">bogus</text>" not in chart  # only the failed job has it: not an x value
    assert "bogus" in html  # still a row of the table
    # the widest y tick, e.g. "2.50 k samples/s", fits left of the axis
    widest = max(len(human(v, "samples/s")) for v in (500.0, 1000.0, 1500.0, 2000.0, 2500.0))
    left = float(chart.split('<line class="grid" x1="', 1)[1].split('"', 1)[0])
    assert left >= TICK_CHAR_PX * widest + 6, (left, widest)


def test_sweep_charts_name_the_failed_jobs_they_leave_out() -> None:
    from torchscan_stages.render.sweep_view import sweep_page

    oom = "WorkloadError: out of memory"
    jobs = [_throughput_job("0", "1", 100.0), _throughput_job("1", "2", 190.0),
            _throughput_job("2", "4", None, oom),
            _throughput_job("3", "bogus", None, oom)]  # fmt: skip
    html = sweep_page(_summary(jobs))
    note = html[html.index('<p class="chart-note failed-jobs">') :].split("</p>", 1)[0]
    # both failures named, marked failed, with their settings and one-line errors; the
    # chart itself has a gap at threads=4 and no "bogus" x value
    assert "Not drawn, 2 job(s) not completed" in note
    assert "job 2 (threads=4) failed: WorkloadError: out of memory" in note
    assert "job 3 (threads=bogus) failed: WorkloadError: out of memory" in note
    assert html.index("failed-jobs") < html.index('<svg class="chart"')  # above the charts
    done = sweep_page(_summary(jobs[:2]))
    assert "failed-jobs" not in done.split("<style>")[1].split("</style>")[1]  # none failed
