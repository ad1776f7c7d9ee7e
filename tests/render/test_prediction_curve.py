"""The prediction page's per-rank parts: the sharding line, FSDP2 categories and the
peak-vs-batch curve with the owner's capacity drawn as a dashed line."""

from __future__ import annotations

from pathlib import Path

import pytest
import render_samples as samples

from torchscan_stages.render import render_report
from torchscan_stages.report import BatchPoint, MetricResult, PredictionReport


def _bytes(value: int) -> MetricResult:
    return MetricResult.complete(
        value,
        unit="bytes",
        scope="predicted_accelerator_allocated",
        method="fake_tensor_prediction",
    )


def _sharded_report() -> PredictionReport:
    base = samples.prediction_report()
    capacity = base.capacity_bytes
    assert capacity == 8 * 2**20
    curve = [
        BatchPoint(batch=1, peak=_bytes(4 * 2**20), fits=True),
        BatchPoint(batch=2, peak=_bytes(6 * 2**20), fits=True),
        BatchPoint(batch=4, peak=_bytes(10 * 2**20), fits=False),
    ]
    categories = dict(base.by_category)
    categories["all_gather_buffers"] = _bytes(0)
    return base.model_copy(
        update={
            "world_size": 4,
            "rank": 0,
            "sharding": "fsdp2",
            "batch_curve": curve,
            "by_category": categories,
        }
    )


def test_sharded_prediction_page_draws_the_curve_and_capacity() -> None:
    html = render_report(_sharded_report())
    assert "Predicted peak by batch" in html
    assert "fsdp2: rank 0 of a fake world of 4" in html
    assert "all-gather buffers (FSDP2 collectives)" in html
    assert html.count('class="ref"') == 1  # the capacity line, once
    assert ">does not fit<" in html and html.count(">fits<") >= 2
    # y axis from 0 to a tick at or above the largest value (10 MiB), capacity 8 MiB inside
    assert "10.0 MiB" in html


def test_single_device_page_has_no_curve() -> None:
    html = render_report(samples.prediction_report())
    assert "Predicted peak by batch" not in html and 'class="ref"' not in html


def test_sharded_prediction_page_in_browser(tmp_path: Path) -> None:
    from chromium import CHROMIUM, SKIP_REASON, load

    if CHROMIUM is None:
        pytest.skip(SKIP_REASON)
    page = tmp_path / "sharded.html"
    render_report(_sharded_report(), page)
    result = load(page, tmp_path / "work", width=1200, height=2400, screenshot=True)
    assert result.page_requests == []
    # the curve: one polyline through the three batches, one dashed capacity line
    assert result.dom.count('class="ln s0"') == 1
    assert result.dom.count('class="ref"') == 1
    assert result.screenshot is not None and result.screenshot.stat().st_size > 30_000
