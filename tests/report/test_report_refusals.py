"""Refusals of report files and output paths: each edit below once loaded,
was shown, or crashed later at a byte position; now it is one ValueError naming the field.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from torch import nn

from torchscan_stages import crawl_module, load_report, render_report
from torchscan_stages.report import report_text

MODEL = nn.Sequential(nn.Linear(4, 3), nn.ReLU())  # 4 * 3 + 3 = 15 parameters


@pytest.fixture(scope="module")
def compact() -> str:
    return report_text(crawl_module(MODEL, (4,)))


def _refused(text: str) -> str:
    with pytest.raises(ValueError) as caught:
        load_report(text)
    message = str(caught.value)
    assert "\n" not in message
    message.encode("utf-8")  # printable: no surrogate of the input copied into the message
    return message


@pytest.mark.parametrize("value", [999, 10**400])
def test_totals_parameters_that_contradict_the_records_are_refused(
    compact: str, value: int
) -> None:
    document = json.loads(compact)
    document["totals"]["parameters"].update(value=value, known_value=value)
    message = _refused(json.dumps(document))
    # trainable 15 + frozen 0 = 15, not 999; 10**400 is shown by its length (401 digits)
    shown = "999" if value == 999 else "a 401-digit number"
    assert f"totals.parameters: {shown} contradicts trainable_parameters + frozen_parameters" in (
        message
    )
    assert "(15 + 0)" in message


def test_totals_parameters_below_the_records_are_refused(compact: str) -> None:
    document = json.loads(compact)
    for name, value in (("parameters", 5), ("trainable_parameters", 5)):
        document["totals"][name].update(value=value, known_value=value)
    # the records hold Linear(4, 3)'s 15 parameters; 5 = 5 + 0 passes the first rule only
    assert "totals.parameters: 5 is fewer than the 15 parameters the layer records hold" in (
        _refused(json.dumps(document))
    )


def test_a_lone_surrogate_is_refused_naming_the_field(compact: str) -> None:
    document = json.loads(compact)
    document["layers"]["columns"]["path"][1] = "0\ud800"
    text = json.dumps(document)  # ascii JSON: the escape \ud800
    assert "\\ud800" in text
    message = _refused(text)
    assert "<text>: invalid text at layers.columns.path.1: a lone UTF-16 surrogate" in message
    # the same as a str holding the character itself, and a field-by-field key
    assert "layers.columns.path.1" in _refused(json.dumps(document, ensure_ascii=False))
    document["provenance"]["\udc80x"] = 1
    assert "provenance.'\\udc80x' (a key)" in _refused(json.dumps(document))


def test_a_surrogate_pair_is_a_character_and_loads(compact: str) -> None:
    document = json.loads(compact)
    document["model_type"] = "Seq\U0001f600"  # JSON \ud83d\ude00: one character, no lone half
    assert load_report(json.dumps(document)).model_type == "Seq\U0001f600"


def test_an_integer_past_the_digit_limit_says_integer_too_long(compact: str) -> None:
    document: dict[str, Any] = json.loads(compact)
    text = json.dumps(document).replace('"value": 15', '"value": 1' + "0" * 5000, 1)
    assert _refused(text) == "<text>: integer too long (5001 digits)"  # 1 and 5,000 zeros


def test_an_output_path_that_cannot_be_written_is_a_value_error(tmp_path: Path) -> None:
    report = crawl_module(MODEL, (4,))
    with pytest.raises(ValueError, match=r"cannot write /proc/x\.html: its folder '/proc'"):
        render_report(report, "/proc/x.html")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match=r"cannot write .*file/r\.json: Not a directory"):
        report.save(tmp_path / "file" / "r.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_a_module_name_with_a_lone_surrogate_is_refused_at_write(tmp_path: Path) -> None:
    model = nn.Sequential()
    model.add_module("a\ud800", nn.ReLU())  # a str, but no UTF-8 file can hold it
    report = crawl_module(model, (3,))
    for write in (
        lambda: report.save(tmp_path / "r.json"),
        lambda: render_report(report, tmp_path / "r.html"),
    ):
        with pytest.raises(
            ValueError, match=r"holds a lone UTF-16 surrogate .* after '.*a'"
        ) as caught:
            write()
        assert "\n" not in str(caught.value)
    assert list(tmp_path.iterdir()) == []  # nothing written, no temporary left
