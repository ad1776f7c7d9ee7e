"""Number formatting: SI prefixes, binary bytes, time units and status-aware cells."""

from __future__ import annotations

import pytest

from torchscan_stages.render.format import (
    describe_value,
    human,
    iec_bytes,
    metric_cell,
    seconds,
    si,
    thousands,
)
from torchscan_stages.report import MetricResult, ValueMeta

FLOPS = {"unit": "FLOPs", "scope": "forward", "method": "module_formula"}


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [
        (1_234_567_890, "FLOPs", "1.23 GFLOPs"),  # 1.23456789e9 -> 3 significant digits
        (999_600, "FLOPs", "1.00 MFLOPs"),  # 999.6 k rounds to 1000 k -> moves up to M
        (532, "FLOPs", "532 FLOPs"),  # below 1000: exact
        (12_345, "samples/s", "12.3 k samples/s"),  # non-count units keep the prefix apart
        (-2_500_000, "MACs", "-2.50 MMACs"),  # deltas keep their sign
    ],
)
def test_si(value: float, unit: str, text: str) -> None:
    assert si(value, unit) == text


def test_iec_bytes() -> None:
    assert iec_bytes(512) == "512 B"
    assert iec_bytes(1_572_864) == "1.50 MiB"  # 1.5 * 1024**2
    assert iec_bytes(46_827_520) == "44.7 MiB"  # 46,827,520 / 1,048,576 = 44.66
    assert iec_bytes(1_048_575) == "1.00 MiB"  # 1023.999 KiB rounds up to the next prefix


def test_seconds() -> None:
    assert seconds(0.0123) == "12.3 ms"
    assert seconds(0.000_040) == "40.0 µs"
    assert seconds(3.21) == "3.21 s"
    assert seconds(5e-9) == "5.00 ns"
    assert seconds(0) == "0 s"


def test_thousands_and_human() -> None:
    assert thousands(11_689_512) == "11,689,512"
    assert thousands(2.5) == "2.5"
    assert human(5_210, "parameters") == "5,210"
    assert human(3, "pixels") == "3 pixels"


def test_metric_cell_states() -> None:
    complete = metric_cell(MetricResult.complete(884_736, **FLOPS))
    assert (complete.text, complete.cls) == ("885 kFLOPs", "ok")
    assert complete.title == "884,736 FLOPs (forward · module_formula)"  # exact in the title
    partial = metric_cell(MetricResult.partial(10_371_392, **FLOPS))
    assert (partial.text, partial.cls) == ("≥ 10.4 MFLOPs", "part")
    assert partial.title.startswith("lower bound ≥ 10,371,392 FLOPs")
    missing = metric_cell(MetricResult.unavailable(**FLOPS), reason="no handler")
    assert (missing.text, missing.cls) == ("—", "na")
    assert missing.title == "unavailable: no handler (forward · module_formula)"
    zero = metric_cell(MetricResult.complete(0, **FLOPS))
    assert zero.text == "0 FLOPs"  # a complete zero is a real zero


def test_describe_value() -> None:
    tensor = ValueMeta(kind="tensor", shape=[1, 64, 56, 56])
    nested = ValueMeta(kind="tuple", items=[tensor, ValueMeta(kind="none")])
    assert describe_value(nested) == "([1, 64, 56, 56], None)"
    mapping = ValueMeta(kind="dict", keys=["logits"], items=[tensor])
    assert describe_value(mapping) == "{logits: [1, 64, 56, 56]}"
    assert describe_value(None) == "—"
    assert len(describe_value(ValueMeta(kind="tensor", shape=[1] * 100), limit=20)) == 20
