"""render/text.py: the plain-text formatter shared by the printout and the Markdown gate."""

from __future__ import annotations

from torchscan_stages.render.text import (
    interval_text,
    markdown_table,
    metric_line,
    metric_text,
    ratio_text,
)
from torchscan_stages.report import MetricResult


def test_metric_text_by_status_in_human_units() -> None:
    complete = MetricResult.complete(0.0090446, unit="s", scope="warmed_block_average", method="m")
    partial = MetricResult.partial(4194304, unit="bytes", scope="process_rss", method="m")
    missing = MetricResult.unavailable(unit="FLOPs", scope="workload", method="m")
    assert metric_text(complete) == "9.04 ms"  # 0.0090446 s = 9.0446 ms, 3 digits
    assert metric_text(partial) == "≥ 4.00 MiB (lower bound)"  # 4194304 = 4 x 1024^2
    assert metric_text(missing) == "— (unavailable)"
    assert metric_text(None) == "— (not measured)"
    line = metric_line("warmed latency (median)", complete, "7 blocks")
    assert (
        line
        == "  [ok]         warmed latency (median)     9.04 ms  [warmed_block_average; m]  7 blocks"
    )


def test_ratios_intervals_and_tables() -> None:
    assert (ratio_text(1.3), ratio_text(None)) == ("1.3000", "—")
    assert interval_text(1.29351, 1.30649) == "[1.2935, 1.3065]"
    assert interval_text(None, 1.0) == "—"
    assert markdown_table(["a", "b"], [["x|y", "1"]]) == [
        "| a | b |",
        "| --- | --- |",
        "| x\\|y | 1 |",
    ]
