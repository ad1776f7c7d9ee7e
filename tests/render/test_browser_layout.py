"""Issue 30 item 10's layout defects, measured in headless Chromium at 1400 px.

* the comparison's verdict table kept one word per line in its reason column: long report
  names in no-wrap headers took the width (the reason got 97 px of a 1,214 px table that was
  wider than the page, 422 px tall);
* the layer tree cut its receptive-field cells ("3 input_p…"): the unit did not fit the
  6.2rem column, and the row's minimum widths overflowed the page, hiding the last column.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import render_samples as samples
from chromium import CHROMIUM, SKIP_REASON, measure
from torch import nn

from torchscan_stages.analysis.crawl import crawl_module
from torchscan_stages.render import render_report

pytestmark = [pytest.mark.browser, pytest.mark.skipif(CHROMIUM is None, reason=SKIP_REASON)]

LONG_REASON = (
    "host too busy: 3 competing processes, PSI cpu some 42.0 %; was: slower, the interval "
    "[×1.210, ×1.420] excludes no change; A/A control ratio 1.0031"
)

# the reason cell's width, its line count (distinct line tops of its text) and the table's
VERDICT_GEOMETRY = """
var table = document.querySelector("table.verdicts");
var cell = table.querySelector("tbody tr td:last-child");  // the reason column
var range = document.createRange(); range.selectNodeContents(cell);
var tops = {}; Array.prototype.forEach.call(range.getClientRects(),
  function (r) { tops[Math.round(r.top)] = 1; });
return {table: table.getBoundingClientRect().width, room: table.parentNode.clientWidth,
        reason: cell.getBoundingClientRect().width, lines: Object.keys(tops).length,
        text: cell.textContent};
"""

# every number cell of the layer tree whose text is wider than its box, and the tree's overflow
TREE_GEOMETRY = """
var cut = Array.prototype.filter.call(document.querySelectorAll(".tree .row > span.n"),
  function (e) { return e.scrollWidth > e.clientWidth; }).map(function (e) {
  return e.textContent + " " + e.scrollWidth + ">" + e.clientWidth; });
var tree = document.querySelector(".tree");
var rf = Array.prototype.map.call(document.querySelectorAll(".tree .row:not(.hd)"),
  function (row) { var c = row.querySelectorAll("span.n")[4]; return [c.textContent, c.title]; });
return {cut: cut, scroll: tree.scrollWidth, client: tree.clientWidth, rf: rf};
"""


def test_verdict_reason_keeps_a_readable_width_at_1400px(tmp_path: Path) -> None:
    sample = samples.comparison(check_passed=True)
    first = sample.deltas[0].model_copy(update={"reason": LONG_REASON, "verdict": "inconclusive"})
    report = sample.model_copy(
        update={
            "deltas": [first, *sample.deltas[1:]],
            "baseline_name": "smallresnet-image-fp32 x1 cpu",
            "candidate_name": "smallresnet-image-bf16_autocast x1 cpu",
        }
    )
    page = tmp_path / "comparison.html"
    render_report(report, page)
    seen = measure(page, tmp_path / "work", VERDICT_GEOMETRY, width=1400)
    assert seen["text"] == LONG_REASON
    assert seen["table"] <= seen["room"], "the verdict table is wider than the page"
    # a quarter of the table at least: 125 characters at ~7 px are 875 px, so <= 4 lines
    assert seen["reason"] >= 0.25 * seen["table"], seen
    assert seen["lines"] <= 4, seen


def test_receptive_field_cells_are_whole_at_1400px(tmp_path: Path) -> None:
    # a real crawl: 3x3 stem, then 7x7 convs (+6 input positions each): 3, 3, 9, 15, ..., 243
    convs = [nn.Conv2d(8, 8, 7, padding=3) for _ in range(40)]
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), *convs, nn.Flatten())
    report = crawl_module(model, (3, 16, 16))
    page = tmp_path / "analysis.html"
    render_report(report, page)
    seen = measure(page, tmp_path / "work", TREE_GEOMETRY, width=1400)
    assert seen["cut"] == [], f"number cells cut: {seen['cut'][:5]}"
    assert seen["scroll"] <= seen["client"], "the layer tree is wider than the page"
    # the column header names the unit; the cell is the bare number, its title the exact value
    by_row = seen["rf"]
    assert by_row[0] == ["243", "243 input_positions"]  # the root: 3 + 40 * 6 = 243
    assert by_row[1] == ["3", "3 input_positions"]  # the stem
    assert by_row[-2] == ["243", "243 input_positions"]  # the last conv
