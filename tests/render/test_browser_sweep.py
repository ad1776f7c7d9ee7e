"""The sweep page in headless Chromium: its chart's y labels are drawn whole (not cut)."""

from __future__ import annotations

from pathlib import Path

import pytest
from chromium import CHROMIUM, SKIP_REASON, load

from torchscan_stages.provenance import environment_provenance
from torchscan_stages.render.sweep_view import sweep_page
from torchscan_stages.report.sweep import SweepJob, SweepSummary

pytestmark = [pytest.mark.browser, pytest.mark.skipif(CHROMIUM is None, reason=SKIP_REASON)]

# Test-only: the page itself has no script; this copy measures each tick label's box.
MEASURE = """<script>
const xs = [...document.querySelectorAll("svg.chart text.tick")].map(t => t.getBBox().x);
document.body.insertAdjacentHTML("beforeend",
  '<pre id="m">' + Math.min(...xs).toFixed(1) + " " + xs.length + "</pre>");
</script>"""


def _job(name: str, threads: str, value: float) -> SweepJob:
    metric = {"status": "complete", "value": value, "known_value": value,
              "unit": "samples/s", "scope": "warmed_block_average"}  # fmt: skip
    row = {"job": name, "status": "completed", "axes": {"threads": threads},
           "metrics": {"latency.throughput": metric}}  # fmt: skip
    return SweepJob.model_validate(row)


def test_long_y_labels_are_not_clipped(tmp_path: Path) -> None:
    # thousands of samples/s: ticks read "1.20 k samples/s", the labels the issue saw cut
    jobs = [_job("0", "1", 1200.0), _job("1", "2", 2400.0)]
    page = sweep_page(SweepSummary(provenance=environment_provenance(), title="t", jobs=jobs))
    path = tmp_path / "sweep.html"
    path.write_text(page.replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    loaded = load(path, tmp_path / "work", width=1400)
    assert loaded.page_requests == []
    measured = loaded.dom.rsplit('<pre id="m">', 1)[1].split("</pre>", 1)[0].split()
    leftmost, count = float(measured[0]), int(measured[1])
    assert count >= 5  # y ticks + x labels + the axis title were measured
    assert leftmost >= 0.0, f"a tick label starts {leftmost} px left of the chart: clipped"
