"""Golden outlines guard the page structure of every report kind and of the index page.

Regenerate after an intended structure change with ``UPDATE_GOLDEN=1 pytest tests/render``
and review the diff.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
import render_samples as samples
from outline import outline

from torchscan_stages.render import render_index, render_report

GOLDEN = Path(__file__).parent / "golden"


def _index() -> str:
    sweep = [
        samples.benchmark_report(threads=t, precision=p, median=0.01 / t)
        for p in ("fp32", "bf16")
        for t in (1, 2)
    ]
    return render_index([*sweep, samples.analysis_report()], title="index")


PAGES: dict[str, Callable[[], str]] = {
    "analysis": lambda: render_report(samples.analysis_report()),
    "flops": lambda: render_report(samples.flop_report()),
    "benchmark": lambda: render_report(samples.benchmark_report()),
    "report_diff": lambda: render_report(samples.report_diff()),
    "benchmark_comparison": lambda: render_report(samples.comparison()),
    "prediction": lambda: render_report(samples.prediction_report()),
    "index": _index,
}


@pytest.mark.parametrize("name", sorted(PAGES))
def test_structure_matches_golden(name: str) -> None:
    got = outline(PAGES[name]())
    path = GOLDEN / f"{name}.outline"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.write_text(got, encoding="utf-8")
    assert path.exists(), f"{path} missing; run with UPDATE_GOLDEN=1 to create it"
    assert got == path.read_text(encoding="utf-8"), f"structure of {name} changed"


def test_outline_collapses_repeats_and_ignores_text() -> None:
    html = '<ul id="r3-x"><li class="a b">one</li><li class="b a">two</li><li>3</li></ul>'
    assert outline(html) == "ul#x\n  li.a.b ×2\n  li\n"
