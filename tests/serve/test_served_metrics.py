"""metrics/serve.json: complete values only, each traced back to its report field, and
read by history with the right direction."""

from __future__ import annotations

from served_reports import served_sample

from torchscan_stages.history.cache import metric_result
from torchscan_stages.history.detect import higher_is_better
from torchscan_stages.serve.metrics import METRIC_FIELDS, served_field, served_metrics


def test_flat_metrics_are_the_complete_values_of_their_fields() -> None:
    report = served_sample(400, 250.0)
    values = served_metrics(report)
    assert values["latency_p50_s"] == report.latency.p50.value
    assert values["achieved_per_s"] == report.achieved_qps.value
    # 400 requests support p99 (368 needed): complete, so it is written
    assert values["latency_p99_s"] == report.latency.p99.value
    # no token stream: its figures are absent, never a zero
    assert values["ttft_p50_s"] is None and values["tokens_per_s"] is None
    small = served_metrics(served_sample(100, 250.0))
    assert small["latency_p99_s"] is None  # 100 requests: a lower bound, not written


def test_history_finds_the_result_behind_each_key_and_its_direction() -> None:
    report = served_sample(400, 250.0, tokens=2)
    for name in METRIC_FIELDS:
        assert metric_result(report, name) is served_field(report, name), name
    assert metric_result(report, "latency_p99_s") is report.latency.p99
    assert metric_result(report, "no_such_metric") is None
    assert higher_is_better("achieved_per_s") and higher_is_better("tokens_per_s")
    assert not higher_is_better("latency_p99_s") and not higher_is_better("ttft_p50_s")
