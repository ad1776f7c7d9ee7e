"""A large analysis page in headless Chromium: the script draws the tree, clicks expand it,
a search finds a deep path, hostile names stay text, and the page's CSP blocks other scripts.

A test hook (one more inline script, allowed by adding its hash to the page's CSP) clicks
and searches after the page's own script ran, then writes what it saw into the DOM, which
``--dump-dom`` returns.
"""

from __future__ import annotations

import base64
import hashlib
import html as html_lib
import json
import re
from pathlib import Path
from typing import Any

import pytest
import render_samples as samples
from chromium import CHROMIUM, SKIP_REASON, load
from test_tree_data import HOSTILE, deep_model

from torchscan_stages.analysis.crawl import crawl_module
from torchscan_stages.render import render_report

pytestmark = [pytest.mark.browser, pytest.mark.skipif(CHROMIUM is None, reason=SKIP_REASON)]

HOOK = """
(function () {
  var top = document.querySelector(".lazytree"), seen = {};
  function rows() { return top.querySelectorAll(".rows .row").length; }
  seen.first = rows();
  seen.names = Array.prototype.map.call(top.querySelectorAll(".rows .row .nm"),
    function (e) { return e.textContent; }).slice(0, 12);
  var closed = top.querySelector('.rows .row.ct[aria-expanded="false"]');
  seen.closed = closed.querySelector(".nm").textContent;
  closed.click();
  seen.afterClick = rows();
  seen.clickedOpen = closed.getAttribute("aria-expanded");
  closed.click();
  seen.afterSecondClick = closed.getAttribute("aria-expanded");
  var form = top.querySelector("form.find");
  form.querySelector("input").value = "WANTED";
  form.requestSubmit();
  var hit = top.querySelector(".row.hit");
  seen.hit = hit ? hit.querySelector(".nm").title : null;
  seen.hitText = hit ? hit.textContent : null;
  top.querySelector("button.alldiag").click();
  seen.diagLines = top.querySelectorAll(".diaglist .dl").length;
  var moreDiag = top.querySelector(".diaglist > button.more");
  seen.diagMore = moreDiag ? moreDiag.textContent : null;
  seen.pwned = document.body.getAttribute("data-pwned");
  seen.images = document.querySelectorAll("img").length;
  document.body.setAttribute("data-seen", JSON.stringify(seen));
})();
"""


def _hooked(page: Path, wanted: str) -> Path:
    """A copy of ``page`` with the hook appended and its hash added to the CSP."""
    hook = HOOK.replace("WANTED", wanted)
    digest = base64.b64encode(hashlib.sha256(hook.encode()).digest()).decode()
    text = page.read_text(encoding="utf-8")
    text = text.replace("script-src ", f"script-src &#39;sha256-{digest}&#39; ", 1)
    text = text.replace("</body>", f"<script>{hook}</script>\n</body>", 1)
    hooked = page.with_name(page.stem + "-hooked.html")
    hooked.write_text(text, encoding="utf-8")
    return hooked


def _seen(dom: str) -> dict[str, Any]:
    found = re.search(r'data-seen="([^"]*)"', dom)
    assert found is not None, "the test hook did not run"
    seen: dict[str, Any] = json.loads(html_lib.unescape(found.group(1)))
    return seen


def test_big_synthetic_tree_opens_expands_and_finds(tmp_path: Path) -> None:
    page = tmp_path / "big.html"
    # 20,000 records: a root, then stages of 1 + 8 blocks x 6 records = 49 records each
    render_report(samples.big_analysis_report(20_000), page)
    result = load(_hooked(page, "stage300.5.conv2"), tmp_path / "work")
    assert result.page_requests == []
    seen = _seen(result.dom)
    # open by default: root (depth 0) and its children (depth 1); (20,000 - 1) // 49 = 408
    # full stages, identical, so one run row "stage0–stage407 ×408", then the partial stage408
    # (19,999 - 408 * 49 = 7 records: its row and one block of 6), open at depth 1
    assert seen["names"][:3] == ["(root)", "stage0–stage407 ×408", "stage408"]
    assert seen["first"] == 4  # root, the run row, stage408 and its one block (collapsed)
    assert seen["closed"] == "stage0–stage407 ×408"
    # opening the run shows its first stage, open, with its 8 identical blocks as one run
    # row: 4 + 1 stage row + 1 run row = 6 rows
    assert seen["afterClick"] == 6 and seen["clickedOpen"] == "true"
    assert seen["afterSecondClick"] == "false"
    # the search revealed a path deep inside both runs
    assert seen["hit"] == "stage300.5.conv2 · call 0"
    assert "Conv2d" in seen["hitText"] and "36,864" in seen["hitText"]  # 64 * 64 * 9 weights


def test_hostile_name_in_big_crawled_report_stays_text(tmp_path: Path) -> None:
    page = tmp_path / "hostile.html"
    # 1 + 4 * 525 = 2,101 records (> 2,000: the scripted tree); block 300 is hostile
    render_report(crawl_module(deep_model(525, hostile_at=300), (16,)), page)
    result = load(_hooked(page, "300.2"), tmp_path / "work")
    assert result.page_requests == []
    seen = _seen(result.dom)
    assert seen["hit"] == "300.2 · call 0"
    assert HOSTILE in seen["hitText"]  # the type name, shown as text on the found row
    assert seen["pwned"] is None and seen["images"] == 0
    # 525 unsupported leaves + 1 receptive_field_stopped = 526 layer diagnostics, 500 a page
    assert seen["diagLines"] == 500 and seen["diagMore"] == "show more (26 left)"


def test_csp_blocks_a_script_without_its_hash(tmp_path: Path) -> None:
    """Control: an inline script the page did not ship must not run, or CSP proves nothing."""
    page = tmp_path / "csp.html"
    render_report(samples.big_analysis_report(2_001), page)
    text = page.read_text(encoding="utf-8").replace(
        "</body>", "<script>document.body.setAttribute('data-ran','1')</script></body>", 1
    )
    page.write_text(text, encoding="utf-8")
    result = load(page, tmp_path / "work")
    assert 'data-ran="1"' not in result.dom
    assert "data-built-ms" in result.dom  # while the tree script itself ran
