"""Layout defects a reader once met on the pipeline's page, in headless Chromium at 1400 px.

* (the comparison's verdict table: now one line a row, tests/render/test_browser_verdicts.py)
* the layer tree cut its receptive-field cells ("3 input_p…"): the unit did not fit the
  6.2rem column, and the row's minimum widths overflowed the page, hiding the last column.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from chromium import CHROMIUM, SKIP_REASON, measure
from torch import nn

from torchscan_stages.analysis.crawl import crawl_module
from torchscan_stages.render import render_report

pytestmark = [pytest.mark.browser, pytest.mark.skipif(CHROMIUM is None, reason=SKIP_REASON)]

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
