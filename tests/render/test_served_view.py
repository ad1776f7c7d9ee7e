"""The served pages: percentile table, latency CDF, LoadGen's verdict, the load curve."""

from __future__ import annotations

from served_reports import capacity_sample, served_sample

from torchscan_stages.render import render_report
from torchscan_stages.render.format import seconds
from torchscan_stages.render.served_view import capacity_view, cdf_chart, served_view


def test_a_served_page_shows_the_table_cdf_and_verdict() -> None:
    report = served_sample(tokens=3)
    view = served_view(report)
    labels = [row.label for row in view.rows]
    assert labels[:4] == [
        "latency (arrival to completion)",
        "queueing delay (arrival to handler start)",
        "of which LoadGen's issue delay (arrival to IssueQuery)",
        "service time (handler call)",
    ]
    assert "time to first token" in labels and "time per output token" in labels
    p50 = report.latency.p50.value
    assert p50 is not None and view.rows[0].cells[1].text == seconds(p50)
    # 400 requests: p99.9 needs 3,688, so its cell is a lower bound
    assert view.rows[0].cells[5].text.startswith("≥")
    html = render_report(report)
    assert 'aria-label="latency CDF"' in html and "LoadGen&#39;s verdict" in html
    assert ">VALID<" in html


def test_the_cdf_is_drawn_in_steps_up_to_one() -> None:
    chart = str(cdf_chart({"latency": [0.001, 0.002, 0.004]}, label="cdf", bound=0.003))
    assert chart.count("<polyline") == 1 and ">bound<" in chart
    assert cdf_chart({"latency": []}, label="cdf") is None  # nothing served: no chart


def test_the_capacity_page_draws_latency_against_offered_load() -> None:
    report = capacity_sample()
    view = capacity_view(report)
    # the injected runs at 100 and 200 requests/s are under the 10 ms bound, 400 is over
    assert [row[4] for row in view.curve] == ["under", "under", "over"]
    assert view.capacity.text.startswith("≥")  # 200 -> 400 is a 100% gap: a lower bound
    html = render_report(report)
    assert 'aria-label="latency vs offered load"' in html and ">bound<" in html
