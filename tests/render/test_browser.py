"""Rendered pages opened in headless Chromium with the network disabled.

Each page is loaded once; the test reads the DOM back (key figures present, report strings
shown as text, no script element), checks that the page started no network request (see
chromium.py for how), and takes desktop and phone-width screenshots.
"""

from __future__ import annotations

import html as html_lib
import re
from pathlib import Path

import pytest
import render_samples as samples
from chromium import CHROMIUM, SKIP_REASON, load, png_size

from torchscan_stages.render import render_index, render_report

pytestmark = [pytest.mark.browser, pytest.mark.skipif(CHROMIUM is None, reason=SKIP_REASON)]


def _text(dom: str) -> str:
    """Visible-ish text of a dumped DOM: tags dropped, entities decoded, spaces collapsed."""
    body = dom.split("</style>", 1)[-1]
    return " ".join(html_lib.unescape(re.sub(r"<[^>]+>", " ", body)).split())


def test_detector_catches_a_network_request(tmp_path: Path) -> None:
    """Control: a page with one external image must be caught, or the other tests prove nothing."""
    page = tmp_path / "leaky.html"
    page.write_text('<!DOCTYPE html><p>x</p><img src="http://example.invalid/a.png">')
    result = load(page, tmp_path / "work")
    assert result.page_requests == ["http://example.invalid/a.png"]


def test_analysis_page_in_browser(tmp_path: Path) -> None:
    page = tmp_path / "analysis.html"
    render_report(samples.analysis_report(), page)
    result = load(page, tmp_path / "work", screenshot=True)
    assert result.page_requests == []
    assert "<script" not in result.dom  # the module type never became an element
    text = _text(result.dom)
    # 10,387,776 known module FLOPs (a lower bound) and 432 + 2*2,304 + 170 = 5,210 parameters
    assert "module FLOPs: ≥ 10.4 MFLOPs" in text
    assert "parameters: 5,210" in text
    assert "<script>alert(1)</script>" in text  # shown as text
    # status and diagnostics come before the numbers (headings, not the navigation links)
    assert (
        text.index("Diagnostics 1 warning")
        < text.index("Totals Inputs")
        < text.index("Layers One row per module call")
    )
    assert result.screenshot is not None
    assert png_size(result.screenshot) == (1280, 2000)
    assert result.screenshot.stat().st_size > 50_000  # a rendered page, not a blank image


def test_benchmark_page_in_browser_at_phone_width(tmp_path: Path) -> None:
    page = tmp_path / "benchmark.html"
    render_report(samples.benchmark_report(), page)
    result = load(page, tmp_path / "work", width=390, height=1600, screenshot=True)
    assert result.page_requests == []
    text = _text(result.dom)
    assert "12.4 ms" in text  # median of the sample's 40 block averages around 12.3 ms
    assert "44.7 MiB" in text  # 46,827,520 B tracked-tensor peak
    assert "≥ 393 MiB" in text  # partial RSS of the run phase
    assert result.screenshot is not None
    assert png_size(result.screenshot) == (390, 1600)
    assert result.screenshot.stat().st_size > 30_000


def test_comparison_and_index_in_browser(tmp_path: Path) -> None:
    comparison = tmp_path / "comparison.html"
    render_report(samples.comparison(), comparison)
    result = load(comparison, tmp_path / "work")
    assert result.page_requests == []
    text = _text(result.dom)
    assert text.index("Output check: failed") < text.index("Verdicts: candidate int8")
    assert "2 delta(s) withheld" in text
    index = tmp_path / "index.html"
    sweep = [
        samples.benchmark_report(threads=t, precision=p, median=0.02 / t)
        for p in ("fp32", "bf16")
        for t in (1, 2, 4)
    ]
    render_index([*sweep, samples.analysis_report(), samples.flop_report()], index, title="Sweep")
    result = load(index, tmp_path / "work", screenshot=True)
    assert result.page_requests == []
    text = _text(result.dom)
    assert "Sweep: latency and throughput against threads and precision" in text
    # fp32 at 4 threads: 20 ms / 4 = 5 ms nominal; block median 5.03 ms
    assert "fp32 4 tinynet fp32 x4 cpu 5.03 ms" in text
    assert result.screenshot is not None and result.screenshot.stat().st_size > 50_000


def test_prediction_page_in_browser(tmp_path: Path) -> None:
    page = tmp_path / "prediction.html"
    render_report(samples.prediction_report(), page)
    result = load(page, tmp_path / "work", width=390, height=1600, screenshot=True)
    assert result.page_requests == []
    assert "<script" not in result.dom
    text = _text(result.dom)
    # 2 + 2 + 4 + 1 MiB + 1536 + 512 B = 9,439,232 B = 9.00 MiB, over the 8 MiB capacity
    assert "Predicted peak 9.00 MiB" in text
    assert "does not fit" in text
    assert text.index("Status complete") < text.index("What is alive at the peak")
    assert result.screenshot is not None and result.screenshot.stat().st_size > 30_000
