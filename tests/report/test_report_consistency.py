"""Loaded analysis reports are consistent by construction: each edit below made a report that
loaded and was used by the page and by compare; now it is one ValueError naming the field."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from torch import nn

from torchscan_stages import crawl_module, load_report
from torchscan_stages.report import report_text

MODEL = nn.Sequential(nn.Linear(4, 3), nn.ReLU())


def _compact() -> dict[str, Any]:
    return json.loads(report_text(crawl_module(MODEL, (4,))))


def _field_by_field() -> dict[str, Any]:
    return json.loads(crawl_module(MODEL, (4,)).model_dump_json())


def _metric_table(doc: dict[str, Any], unit: str) -> dict[str, Any]:
    return next(m for m in doc["layers"]["tables"]["metric"] if m["unit"] == unit)


def _set(entry: dict[str, Any], value: Any) -> None:
    entry.update(value=value, known_value=value)


EDITS: list[tuple[str, Callable[[dict[str, Any]], Any], str]] = [
    # totals.module_flops 1 while the root record holds 30 (the issue: 1 vs 25,454,506)
    ("totals-contradict-root", lambda d: _set(d["totals"]["module_flops"], 1),
     "totals.module_flops: 1 contradicts the root record(s), which sum to 30"),
    ("bool-count", lambda d: d["layers"]["columns"]["params.parameters"].__setitem__(1, True),
     "layers.1.params.parameters"),
    ("float-flop-count", lambda d: _set(_metric_table(d, "FLOPs"), 1e308),
     "must be an integer count for unit 'FLOPs', got 1e+308"),
    ("duplicate-identity", lambda d: d["layers"]["columns"]["path"].__setitem__(2, "0"),
     "a second record of path '0' call_index 0"),
    ("root-depth-7", lambda d: d["layers"]["columns"]["depth"].__setitem__(0, 7),
     "layers.0: depth 7 of path ''; expected depth 0 (the root module)"),
    ("negative-call-index", lambda d: d["layers"]["columns"]["call_index"].__setitem__(1, -1),
     "call_index"),
]  # fmt: skip


@pytest.mark.parametrize(("edit", "expected"), [e[1:] for e in EDITS], ids=[e[0] for e in EDITS])
def test_an_inconsistent_compact_report_is_refused(edit: Any, expected: str) -> None:
    document = _compact()
    edit(document)
    with pytest.raises(ValueError) as caught:
        load_report(json.dumps(document))
    assert expected in str(caught.value) and "\n" not in str(caught.value)


def test_an_inconsistent_field_by_field_report_is_refused() -> None:
    document = _field_by_field()
    document["layers"][0]["depth"] = 7
    with pytest.raises(ValueError, match="depth 7 of path ''; expected depth 0"):
        load_report(json.dumps(document))
    document = _field_by_field()
    document["totals"]["macs"].update(value=1, known_value=1)
    with pytest.raises(ValueError, match=r"totals\.macs: 1 contradicts the root record"):
        load_report(json.dumps(document))


def test_the_unedited_report_loads_equal() -> None:
    report = crawl_module(MODEL, (4,))
    assert load_report(report_text(report)) == report
    assert load_report(report.model_dump_json()) == report
