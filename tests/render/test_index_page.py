"""The index page a newcomer reads after `make main`: every link says where it goes, every row
has a headline, each section once, one conventions box, a self-comparison explained."""

from __future__ import annotations

import re

import pytest
import torch

from torchscan_stages import (
    compare_reports,
    crawl_module,
    measure_flops,
    measure_peak_memory,
    profile_workload,
)
from torchscan_stages.render import render_index
from torchscan_stages.report import AnyReport

MODEL = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
X = torch.ones(2, 4)


def _forward() -> torch.Tensor:
    with torch.no_grad():
        return MODEL(X)


@pytest.fixture(scope="module")
def reports() -> dict[str, AnyReport]:
    memory = measure_peak_memory(_forward)
    return {
        "crawl": crawl_module(MODEL, args=(X,)),
        "flops": measure_flops(_forward),
        "memory": memory.model_copy(update={"name": "mlp-fp32"}),
        "memory_again": memory.model_copy(update={"name": "mlp-fp32"}),
        "profile": profile_workload(_forward).model_copy(update={"name": "mlp-fp32"}),
        "diff": compare_reports(crawl_module(MODEL, args=(X,)), crawl_module(MODEL, args=(X,))),
    }


def _nav(page: str) -> list[str]:
    nav = re.search(r'<nav class="toc"[^>]*>(.*?)</nav>', page, re.S)
    assert nav is not None
    return [re.sub(r"<[^>]+>", "", a) for a in re.findall(r"<a [^>]*>.*?</a>", nav.group(1))]


def test_nav_names_each_report_by_what_it_holds_and_whose_uniquely(
    reports: dict[str, AnyReport],
) -> None:
    page = render_index([reports[k] for k in ("crawl", "memory", "memory_again", "profile")])
    links = _nav(page)
    assert links[2:] == [
        "1. model cost · Sequential",
        "2. memory · mlp-fp32 (1)",  # two reports that would read the same are numbered
        "3. memory · mlp-fp32 (2)",
        "4. profile · mlp-fp32",
    ]
    assert len(set(links)) == len(links)


def test_a_profile_row_has_its_headline_in_words(reports: dict[str, AnyReport]) -> None:
    page = render_index([reports["profile"], reports["memory"]])
    row = re.search(r"top operator \(instrumented\): <b>([^<]+)</b>", page)
    assert row is not None and row.group(1).startswith("aten::")
    assert "% of profiled self time" in row.group(1)


def test_an_operator_count_repeated_by_the_flops_report_is_shown_once(
    reports: dict[str, AnyReport],
) -> None:
    # the crawl's forward and the flops stage's workload dispatch the same 2 operators
    page = render_index([reports["crawl"], reports["flops"]])
    assert page.count(">Top operators<") == 1
    assert "The workload call of report 2 (" in page
    analysis = page.split('id="r2-top"')[0]
    assert analysis.count("Counting conventions") == 1  # module and operator conventions, one box


def test_a_model_compared_with_itself_says_why_every_count_is_x1(
    reports: dict[str, AnyReport],
) -> None:
    page = render_index([reports["diff"]])
    assert "the same model on both sides" in page
