"""One call numbering in the text table, the HTML page and the JSON: a repeat call
is ``name (call k)`` with k its record's ``call_index`` (the first call, 0, unmarked)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import torch
from torch import nn

from torchscan_stages import render_report, summary
from torchscan_stages.report import report_text


class ReluTwice(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.relu = nn.ReLU()
        self.linear = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.linear(self.relu(x)))


def test_the_second_call_is_call_1_in_text_html_and_json() -> None:
    out = io.StringIO()
    report = summary(ReluTwice(), (4,), file=out)
    second = [layer for layer in report.layers if layer.path == "relu"][1]
    document = json.loads(report.model_dump_json())
    assert second.call_index == 1 and document["layers"][3]["call_index"] == 1
    text = out.getvalue()
    assert "relu (call 1)" in text and "(call 2)" not in text
    assert "(call k): a repeat call, call_index k (the first, 0, unmarked)" in text
    page = render_report(report_text(report))  # the page of the saved JSON
    assert 'relu · call 1">relu (call 1)' in page and "(call 2)" not in page
    script = (Path(__file__).parents[2] / "torchscan_stages/render/templates/tree.js").read_text()
    assert '" (call " + ci + ")"' in script  # the lazy tree of large reports: the same k
