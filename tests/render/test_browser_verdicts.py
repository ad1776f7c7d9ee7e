"""The default page's comparison, read in headless Chromium at 1280 px: each verdict row is
one line (metric, ratio, interval, verdict, a short reason), details behind a disclosure,
nothing clipped, and the comparison's badge shows its verdict.

The comparison is the default demo's: a candidate 21x slower than its baseline on a host
where every block lost the CPU (injected: a simulated clock and probe, no real timing),
with the long report names of ``make main``; the other sections are the page's usual kinds.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import render_samples as samples
from chromium import CHROMIUM, SKIP_REASON, measure
from noise_models import SimulatedHost, preempted

from torchscan_stages import Judge, LatencyOptions, compare_benchmarks
from torchscan_stages.render import render_index
from torchscan_stages.render.verdicts import SHORT_REASON
from torchscan_stages.report import BenchmarkComparison

pytestmark = [pytest.mark.browser, pytest.mark.skipif(CHROMIUM is None, reason=SKIP_REASON)]

# per verdict row: the distinct line tops of each cell's text (details closed), the row's
# height, the cells whose content is wider than the cell, and the table against its room
ROWS = """
var out = [];
document.querySelectorAll("table.verdicts").forEach(function (table) {
  table.querySelectorAll(":scope > tbody > tr").forEach(function (row) {
    var lines = 0, cut = [];
    row.querySelectorAll(":scope > td").forEach(function (cell) {
      var shown = cell.querySelector("summary") || cell;
      var range = document.createRange(); range.selectNodeContents(shown);
      // a new line starts more than 8 px below the last (a badge sits 3 px above its text)
      var tops = Array.prototype.filter.call(range.getClientRects(), function (r) {
        return r.width > 0; }).map(function (r) { return r.top; }).sort(function (a, b) {
        return a - b; });
      var count = tops.length ? 1 : 0;
      for (var i = 1; i < tops.length; i++) { if (tops[i] - tops[i - 1] > 8) { count++; } }
      lines = Math.max(lines, count);
      if (cell.scrollWidth > cell.clientWidth + 1) { cut.push(cell.textContent.slice(0, 40)); }
    });
    out.push({metric: row.cells[0].textContent, lines: lines, cut: cut,
              height: row.getBoundingClientRect().height,
              reason: row.querySelector("td.why summary").textContent,
              full: row.querySelector("td.why details").textContent});
  });
});
var tables = Array.prototype.map.call(document.querySelectorAll("table.verdicts"),
  function (t) { return [t.getBoundingClientRect().width, t.parentNode.clientWidth]; });
var clipped = Array.prototype.filter.call(document.querySelectorAll("td, th"), function (c) {
  var style = getComputedStyle(c);
  return style.overflow !== "visible" && c.scrollWidth > c.clientWidth + 1; }).length;
var badges = Array.prototype.map.call(document.querySelectorAll(".badge.b-slower"),
  function (b) { return b.textContent; });
return {rows: out, tables: tables, clipped: clipped, badges: badges};
"""


def _demo_comparison() -> BenchmarkComparison:
    # 1 ms against 21 ms; 90% of calls lose 0.5-1.5 ms to a busy process with an involuntary
    # switch, so few rounds run undisturbed: the host is busy, the effect is far beyond it
    sim = SimulatedHost(preempted(0.9, 1e-3), seed=0)
    result = compare_benchmarks(
        sim.workload(1e-3),
        sim.workload(21e-3),
        check=lambda a, b: True,
        options=LatencyOptions(clock=sim, probe=sim.probe, max_run_time=2.0),
        judge=Judge(seed=0),
        baseline_name="smallresnet-image-fp32 x1 cpu",
        candidate_name="smallresnet-image-bf16_autocast x1 cpu",
    )
    # the worst row a page can get: the longest metric name, a loaded-host verdict label and
    # a reason cut to the full 100 characters
    worst = result.deltas[0].model_copy(
        update={
            "metric": "memory.accelerator_allocated",
            "reason": "loaded host: " + "interval " * 40,
        }
    )
    return result.model_copy(update={"deltas": [*result.deltas, worst]})


def test_default_page_comparison_rows_are_one_line_at_1280px(tmp_path: Path) -> None:
    comparison = _demo_comparison()
    latency = comparison.deltas[0]
    assert latency.verdict == "slower" and (latency.reason or "").startswith("loaded host")
    page = tmp_path / "index.html"
    render_index(
        [samples.analysis_report(), samples.benchmark_report(), comparison, samples.report_diff()],
        page,
        title="torchscan_stages reports",
    )
    seen = measure(page, tmp_path / "work", ROWS, width=1280)
    rows = seen["rows"]
    # the 5 deltas of an interleaved run (latency, throughput, first call, A/A control, CPU
    # time) and the worst case: each one line
    assert [r["metric"] for r in rows] == [d.metric for d in comparison.deltas]
    assert max(len(r["reason"]) for r in rows) >= SHORT_REASON - 9  # cut at a word
    for row in rows:
        assert row["lines"] == 1, row
        assert not row["cut"], row
        assert len(row["reason"]) <= SHORT_REASON, row
    reasons = {d.metric: d.reason for d in comparison.deltas}
    for row in rows:  # the full reason is behind the disclosure
        assert (reasons[row["metric"]] or "") in row["full"]
    width, room = seen["tables"][0]
    assert width <= room, seen["tables"]  # no scrolling needed at 1280 px, let alone clipping
    assert seen["clipped"] == 0
    # the comparison's badge (index overview, header, status line) shows the verdict
    assert seen["badges"].count("latency: slower (loaded host)") == 3, seen["badges"]
    heights = [r["height"] for r in rows]
    assert max(heights) <= 1.25 * min(heights), json.dumps(rows)[:2000]
