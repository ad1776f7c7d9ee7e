"""The large-report layer tree: compact data, aggregated runs, threshold and escaping.

Reports above LAZY_LAYERS records embed their tree as JSON for the page's inline script;
these tests read that JSON back from the page and check it against the report.
"""

from __future__ import annotations

import html as html_lib
import json
import re
from typing import Any

import pytest
import render_samples as samples
import torch
from torch import nn

from torchscan_stages.analysis.crawl import crawl_module
from torchscan_stages.render import render_index, render_report
from torchscan_stages.render.analysis_view import LAZY_LAYERS
from torchscan_stages.render.html import tree_script
from torchscan_stages.render.tree_data import script_json

HOSTILE = "</script><img src=x onerror=document.body.setAttribute('data-pwned',1)>"


class Mystery(nn.Module):
    """A leaf without a handler: unavailable module FLOPs and a diagnostic at its path."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 0.5


Hostile = type(HOSTILE, (Mystery,), {})  # a module class whose name is markup


def deep_model(blocks: int, hostile_at: int | None = None) -> nn.Module:
    """1 + 4 * blocks records: the root and blocks of Linear, ReLU and a leaf without handler."""
    return nn.Sequential(
        *[
            nn.Sequential(nn.Linear(16, 16), nn.ReLU(), Hostile() if b == hostile_at else Mystery())
            for b in range(blocks)
        ]
    )


def page_data(html: str, prefix: str = "r0-") -> dict[str, Any]:
    text = html.split(f'id="{prefix}tree-data">', 1)[1].split("</script>", 1)[0]
    data: dict[str, Any] = json.loads(text)
    return data


def cell_text(data: dict[str, Any], cell: int) -> tuple[str, str]:
    text, title, _ = data["e"][cell]
    return data["s"][text], data["s"][title]


@pytest.fixture(scope="module")
def crawled() -> tuple[Any, str]:
    # 525 blocks -> 1 + 4 * 525 = 2,101 records, just over LAZY_LAYERS
    report = crawl_module(deep_model(525, hostile_at=300), (16,))
    return report, render_report(report)


def test_threshold_keeps_small_reports_static() -> None:
    small = samples.big_analysis_report(LAZY_LAYERS)
    html = render_report(small)
    assert "<script" not in html and 'class="lazytree"' not in html
    assert html.count('<div class="row">') + html.count('<summary class="row">') == LAZY_LAYERS
    large = render_report(samples.big_analysis_report(LAZY_LAYERS + 1))
    assert len(page_data(large)["p"]) == LAZY_LAYERS + 1
    assert html.count("<details") > 0 and large.count("<details") < html.count("<details")


def test_crawled_report_round_trips_through_the_data(crawled: tuple[Any, str]) -> None:
    report, html = crawled
    assert len(report.layers) == 1 + 4 * 525
    data = page_data(html)
    strings = data["s"]
    # pre-order with parents: the root, then each block followed by its three leaves
    assert data["p"][:6] == [-1, 0, 1, 1, 1, 0]
    assert [strings[n] for n in data["n"][:5]] == ["", "0", "0", "1", "2"]
    assert data["x"] == {}  # every path follows from its parent's path and its name
    types = [strings[data["h"][k][0]] for k in data["k"][:5]]
    assert types == ["Sequential", "Sequential", "Linear", "ReLU", "Mystery"]
    # 525 leaves without a handler + 1 receptive_field_stopped (at 0.2) = 526 diagnostics
    assert len(data["d"]) == 526
    for entry, diag in zip(data["d"], report.diagnostics, strict=True):
        assert strings[entry[1]] == diag.code and strings[entry[3]] == diag.path
        # the message is rebuilt from its parts joined by the path
        assert strings[entry[3]].join(strings[part] for part in entry[6]) == diag.message


def test_identical_blocks_become_one_run_with_totals(crawled: tuple[Any, str]) -> None:
    _, html = crawled
    data = page_data(html)
    # block 0's Linear has a receptive field (its input is the model input); later blocks
    # follow an unhandled leaf, so theirs is unavailable: block 0 stands alone. Block 300
    # holds the hostile subclass (another type), which splits the rest in two runs:
    # blocks 1-299 (299 blocks) and 301-524 (224 blocks).
    runs = [(data["p"][r[0]], strings_of(data, r[0]), r[1]) for r in data["r"]]
    assert runs == [(0, "1", 299), (0, "301", 224)]
    params, flops, macs = (cell_text(data, c) for c in data["r"][0][2:5])
    # each block: Linear 16 * 16 + 16 = 272 parameters; 299 * 272 = 81,328
    assert params == ("81,328", "81,328 parameters in these rows")
    # each block: >= 528 (Linear) + 16 (ReLU) = 544 FLOPs, Mystery unknown; 299 * 544 = 162,656
    assert flops == ("≥ 163 kFLOPs", "lower bound ≥ 162,656 FLOPs")
    assert macs == ("76.5 kMACs", "76,544 MACs")  # 299 * 256 MACs, complete


def strings_of(data: dict[str, Any], node: int) -> str:
    name: str = data["s"][data["n"][node]]
    return name


def test_hostile_module_name_stays_text(crawled: tuple[Any, str]) -> None:
    report, html = crawled
    assert any(layer.type == HOSTILE for layer in report.layers)
    # exactly the two script elements of the tree: its data and its code
    assert html.count("<script") == 2 and html.count("</script>") == 2
    assert "<img" not in html and re.search(r"<[^<>]*onerror", html) is None  # no such tag
    data = page_data(html)
    assert HOSTILE in data["s"]  # the JSON gives the exact name back
    # the grouped diagnostics table shows it escaped
    assert "&lt;/script&gt;&lt;img" in html


def test_script_json_escapes_markup() -> None:
    text = script_json({"a": "</script><!-- & \u2028"})
    assert re.search(r"[<>&\u2028]", text) is None
    assert json.loads(text) == {"a": "</script><!-- & \u2028"}


def test_csp_allows_only_the_tree_script(crawled: tuple[Any, str]) -> None:
    _, html = crawled
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html)
    assert csp is not None
    policy = html_lib.unescape(csp.group(1))
    assert "default-src 'none'" in policy and "script-src 'sha256-" in policy
    assert f"<script>{tree_script()}</script>" in html
    # no resource reference: no src/href to anything but in-page anchors, no http(s)
    plain = render_report(samples.big_analysis_report(LAZY_LAYERS + 1))
    assert re.search(r"""\bsrc\s*=|\bhref\s*=\s*(?!["']?#)|url\s*\(|<link\b""", plain) is None
    assert "https://" not in plain and "http://" not in plain


def test_index_page_holds_two_large_trees_apart() -> None:
    big = samples.big_analysis_report(LAZY_LAYERS + 1)
    html = render_index([big, samples.flop_report(), big])
    # sections r1- and r3- each carry their own data; the script is the same text twice
    assert len(page_data(html, "r1-")["p"]) == LAZY_LAYERS + 1
    assert len(page_data(html, "r3-")["p"]) == LAZY_LAYERS + 1
    assert 'data-json="r1-tree-data"' in html and 'data-json="r3-tree-data"' in html
    assert html.count(f"<script>{tree_script()}</script>") == 2
    assert html.count("Content-Security-Policy") == 1


def test_small_report_in_an_index_keeps_the_page_script_free() -> None:
    html = render_index([samples.analysis_report(), samples.flop_report()])
    assert "<script" not in html and "Content-Security-Policy" not in html


def test_structure_mode_report_shows_unavailable_not_zero() -> None:
    # 1 + 4 * 600 = 2,401 records; structure mode records shapes and parameters only
    report = crawl_module(deep_model(600), (16,), mode="structure")
    data = page_data(render_report(report))
    linear = data["h"][data["k"][2]]  # root, block 0, its Linear
    assert data["s"][linear[0]] == "Linear"
    assert cell_text(data, linear[3])[0] == "272"  # 16 * 16 + 16 parameters
    # module FLOPs, MACs, DMAs: unavailable ("—"), operator FLOPs: not recorded ("—")
    shown = [cell_text(data, c)[0] for c in linear[4:]]
    assert shown[:3] == ["—", "—", "—"] and shown[4] == "—"
    assert [data["e"][c][2] for c in linear[4:7]] == [2, 2, 2]  # class "na", never "ok"


def test_repeated_calls_and_odd_paths_are_kept() -> None:
    big = samples.big_analysis_report(LAZY_LAYERS + 1)
    # a record whose name is not the last part of its path keeps its own path
    odd = big.layers[5].model_copy(update={"name": "renamed"})
    big = big.model_copy(update={"layers": [*big.layers[:5], odd, *big.layers[6:]]})
    data = page_data(render_report(big))
    again = sum(1 for layer in big.layers if layer.call_index)
    assert len(data["i"]) == again > 0  # each second call of a block's relu
    assert {data["s"][v] for v in data["x"].values()} == {odd.path}


def test_run_totals_never_add_different_methods() -> None:
    from torchscan_stages.render.tree_data import _run_totals, _Tables

    leaf = samples.layer("a", 1, "ReLU", (1, 8), flops=8, macs=0)
    other = leaf.metrics.module_flops.model_copy(update={"method": "operator_dispatch"})
    odd = leaf.model_copy(
        update={"metrics": leaf.metrics.model_copy(update={"module_flops": other})}
    )
    tables = _Tables()
    same = _run_totals([leaf, leaf, leaf], {}, False, tables)
    mixed = _run_totals([leaf, leaf, odd], {}, False, tables)
    assert cell_text({"s": tables.strings, "e": tables.cells}, same[1]) == (
        "24 FLOPs",  # 3 * 8
        "24 FLOPs",
    )
    text, title = cell_text({"s": tables.strings, "e": tables.cells}, mixed[1])
    assert text == "—" and title.startswith("not summed: refusing to add")
