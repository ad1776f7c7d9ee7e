"""Property tests: random models through crawl_module, random damage through load_report.

In CI every property runs with a fixed seed (``derandomize``) and a bounded example count, so
the suite stays fast and repeatable on a loaded 2-core machine. ``TORCHSCAN_LONG_PROPERTIES=1``
runs many more random examples (not derandomized) for a deliberate search.
"""

from __future__ import annotations

import copy
import json
import math
import sys
from typing import Any

import pytest
import torch
from hypothesis import event, given
from hypothesis import strategies as st
from property_settings import property_settings
from simulated_clock import SimulatedClock
from torch import nn

from torchscan_stages import (
    compare_reports,
    crawl_module,
    load_report,
    measure_flops,
    measure_latency,
    measure_peak_memory,
    measure_peak_rss,
    profile_workload,
    render_report,
)
from torchscan_stages.report import REPORT_TYPES, AnalysisReport

# --------------------------------------------------------------- random stacks of layers

# one layer spec: (kind, width out, bias, training flag)
LAYER = st.tuples(
    st.sampled_from(["linear", "relu", "dropout", "identity", "tanh"]),
    st.integers(min_value=1, max_value=12),
    st.booleans(),
    st.booleans(),
)
STACK = st.fixed_dictionaries(
    {
        "layers": st.lists(LAYER, min_size=1, max_size=6),
        "rows": st.lists(st.integers(min_value=1, max_value=3), min_size=1, max_size=2),
        "width": st.integers(min_value=1, max_value=12),
        "dtype": st.sampled_from([torch.float32, torch.float64, torch.bfloat16]),
        "training": st.booleans(),
    }
)


def _build(spec: dict[str, Any]) -> tuple[nn.Sequential, int]:
    """The model and its closed-form module FLOPs for an input of shape rows + [width]."""
    rows = math.prod(spec["rows"])
    width = spec["width"]
    layers: list[nn.Module] = []
    flops = 0
    for kind, out, bias, training in spec["layers"]:
        if kind == "linear":
            layer: nn.Module = nn.Linear(width, out, bias=bias)
            # 2 x rows x in x out multiply-adds, plus one add per output element for the bias
            flops += 2 * rows * width * out + (rows * out if bias else 0)
            width = out
        elif kind == "relu":
            layer = nn.ReLU()
            flops += rows * width  # one max(x, 0) per element
        elif kind == "tanh":
            layer = nn.Tanh()
        elif kind == "dropout":
            layer = nn.Dropout(0.5)  # the crawl runs in eval mode: a pass-through, 0 FLOPs
        else:
            layer = nn.Identity()
        layer.train(training)
        layers.append(layer)
    model = nn.Sequential(*layers).to(spec["dtype"])
    model.training = spec["training"]
    return model, flops


def _state(model: nn.Module) -> list[tuple[str, bool, int, int, int]]:
    """Training flag and hook counts of every module: what a crawl must leave as found."""
    return [
        (
            name,
            module.training,
            len(module._forward_hooks),
            len(module._forward_pre_hooks),
            len(module._backward_hooks),
        )
        for name, module in model.named_modules()
    ]


@property_settings(ci_examples=25)
@given(STACK)
def test_random_stacks_crawl_to_closed_forms_and_leave_the_model(spec: dict[str, Any]) -> None:
    model, expected_flops = _build(spec)
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    before = _state(model)
    grad_before = torch.is_grad_enabled()
    x = torch.randn(*spec["rows"], spec["width"]).to(spec["dtype"])
    report = crawl_module(model, args=(x,))
    # the model is left as found: flags, hooks, weights, grad mode
    assert _state(model) == before
    assert all(torch.equal(weights[k], v) for k, v in model.state_dict().items())
    assert torch.is_grad_enabled() == grad_before
    # formulas equal the closed forms (Tanh has a formula of its own, so it is left out
    # of the sum only when the stack has none)
    totals = report.totals
    if not any(kind == "tanh" for kind, *_ in spec["layers"]):
        assert totals.module_flops.status == "complete"
        assert totals.module_flops.value == expected_flops
    params = sum(p.numel() for p in model.parameters())
    assert totals.parameters.value == params
    # reports round-trip through JSON and load_report, and render
    text = report.model_dump_json()
    assert AnalysisReport.model_validate_json(text) == report
    assert load_report(text) == report


CONV = st.fixed_dictionaries(
    {
        "batch": st.integers(min_value=1, max_value=2),
        "groups": st.sampled_from([1, 2]),
        "channels": st.integers(min_value=1, max_value=3),  # per group
        "out": st.integers(min_value=1, max_value=3),  # per group
        "size": st.integers(min_value=3, max_value=9),
        "kernel": st.integers(min_value=1, max_value=3),
        "stride": st.integers(min_value=1, max_value=3),
        "padding": st.integers(min_value=0, max_value=1),
        "bias": st.booleans(),
        "flatten": st.booleans(),
        "training": st.booleans(),
    }
)


@property_settings(ci_examples=20)
@given(CONV)
def test_random_conv_stacks_match_the_closed_form(spec: dict[str, Any]) -> None:
    g, k, s, p = spec["groups"], spec["kernel"], spec["stride"], spec["padding"]
    cin, cout, n, size = spec["channels"] * g, spec["out"] * g, spec["batch"], spec["size"]
    conv = nn.Conv2d(cin, cout, k, stride=s, padding=p, groups=g, bias=spec["bias"])
    layers: list[nn.Module] = [conv, nn.ReLU()]
    if spec["flatten"]:
        layers.append(nn.Flatten())
    model = nn.Sequential(*layers).train(spec["training"])
    before = _state(model)
    report = crawl_module(model, args=(torch.randn(n, cin, size, size),))
    assert _state(model) == before
    side = (size + 2 * p - k) // s + 1  # output height = width
    out_elements = n * cout * side * side
    macs = out_elements * (cin // g) * k * k  # each output: C_in/groups x k x k products
    flops = 2 * macs + (out_elements if spec["bias"] else 0) + out_elements  # + ReLU's max
    assert report.totals.macs.status == "complete" and report.totals.macs.value == macs
    assert report.totals.module_flops.value == flops
    assert load_report(report.model_dump_json()) == report


IMAGE_LAYERS = st.lists(
    st.tuples(
        st.sampled_from(
            ["conv", "bn", "relu", "gelu", "maxpool", "avgpool", "dropout2d", "identity", "ln"]
        ),
        st.booleans(),  # training flag of this layer
    ),
    min_size=1,
    max_size=7,
)


def _image_layer(kind: str, channels: int, side: int) -> tuple[nn.Module, int]:
    """A layer that keeps the channel count, and the spatial side it leaves."""
    if kind == "conv":
        return nn.Conv2d(channels, channels, 3, padding=1), side
    if kind == "bn":
        return nn.BatchNorm2d(channels), side
    if kind in ("maxpool", "avgpool") and side >= 2:
        pool = nn.MaxPool2d(2) if kind == "maxpool" else nn.AvgPool2d(2)
        return pool, side // 2
    if kind == "ln":
        return nn.LayerNorm([side, side]), side
    simple = {"relu": nn.ReLU, "gelu": nn.GELU, "dropout2d": nn.Dropout2d}
    return simple.get(kind, nn.Identity)(), side


@property_settings(ci_examples=20)
@given(
    IMAGE_LAYERS,
    st.integers(min_value=1, max_value=3),
    st.integers(min_value=1, max_value=8),
    st.sampled_from([torch.float32, torch.float64]),
)
def test_random_image_stacks_never_raise_and_leave_the_model(
    layers: list[tuple[str, bool]], channels: int, side: int, dtype: torch.dtype
) -> None:
    modules: list[nn.Module] = []
    size = side
    for kind, training in layers:
        module, size = _image_layer(kind, channels, size)
        modules.append(module.train(training))
    model = nn.Sequential(*modules).to(dtype)
    weights = {k: v.clone() for k, v in model.state_dict().items()}  # BN running stats too
    before = _state(model)
    report = crawl_module(model, args=(torch.randn(2, channels, side, side, dtype=dtype),))
    assert _state(model) == before
    assert all(torch.equal(weights[k], v) for k, v in model.state_dict().items())
    for name in ("module_flops", "macs", "dmas", "parameters"):
        result = getattr(report.totals, name)
        assert result.known_value is None or result.known_value >= 0
    assert report.totals.parameters.value == sum(p.numel() for p in model.parameters())
    assert load_report(report.model_dump_json()) == report


# ----------------------------------------------------------- random damage to reports


def _valid_documents() -> list[dict[str, Any]]:
    """Real reports: a crawl, memory, latency, a model diff, operator FLOPs, RSS, a profile."""
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    analysis = crawl_module(model, (4,))
    wider = crawl_module(nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 2)), (4,))
    memory = measure_peak_memory(lambda: model(torch.randn(2, 4)))
    clock = SimulatedClock()  # the latency numbers come from a simulated clock, not the host
    latency = measure_latency(
        clock.workload(0.002, noise=0.1), options={"clock": clock}, work_units=4
    )
    diff = compare_reports(analysis, wider)
    flops = measure_flops(lambda: model(torch.randn(2, 4)))
    rss = measure_peak_rss(
        [
            sys.executable,
            "-c",
            "from torchscan_stages.measure.rss_phases import mark_phase\nmark_phase('start')",
        ],
        timeout=60,
    )
    profile = profile_workload(lambda: model(torch.randn(2, 4)), row_limit=5)
    reports = (analysis, memory, latency, diff, flops, rss, profile)
    return [json.loads(r.model_dump_json()) for r in reports]


DOCUMENTS = _valid_documents()

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=6,
)


NUMBERS = (
    st.integers(min_value=-(2**64), max_value=2**64)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([0, -1, 0.0, -0.0, 1e-300, 1e308])
)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _get(document: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        document = document[key]
    return document


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside a JSON document."""
    found = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _paths(value, (*prefix, index))
    return found


def _mutate(document: Any, path: tuple[Any, ...], action: str, value: Any) -> Any:
    if not path:
        return value
    parent = document
    for key in path[:-1]:
        parent = parent[key]
    last = path[-1]
    if action == "delete" and isinstance(parent, dict):
        del parent[last]
    elif action == "extra" and isinstance(parent, dict):
        parent["unexpected_field"] = value
    else:
        parent[last] = value
    return document


@property_settings(ci_examples=200)
@given(st.data())
def test_damaged_reports_load_right_or_fail_with_one_value_error(data: st.DataObject) -> None:
    document = copy.deepcopy(data.draw(st.sampled_from(DOCUMENTS)))
    for _ in range(data.draw(st.integers(min_value=1, max_value=3))):
        paths = _paths(document)
        numbers = [p for p in paths if _is_number(_get(document, p))]
        if numbers and data.draw(st.booleans()):  # a number changed: likelier to load
            path, value = data.draw(st.sampled_from(numbers)), data.draw(NUMBERS)
            document = _mutate(document, path, "replace", value)
            parent = _get(document, path[:-1]) if path else None
            if (
                isinstance(parent, dict)
                and path[-1] in ("value", "known_value")
                and parent.get("status") == "complete"
            ):
                parent["value"] = parent["known_value"] = value  # keep the MetricResult whole
            continue
        path = data.draw(st.sampled_from(paths))
        action = data.draw(st.sampled_from(["replace", "delete", "extra"]))
        document = _mutate(document, path, action, data.draw(JSON_VALUES))
    text = json.dumps(document)  # NaN and Infinity are written as JSON's common extension
    try:
        report = load_report(text)
    except ValueError as error:
        event("refused")
        assert str(error) and "\n" not in str(error).split(": ", 1)[0]
        return
    event("accepted")
    # accepted: the right model for its kind, and every accepted report renders
    assert isinstance(report, REPORT_TYPES[document["kind"]])
    assert render_report(report).startswith("<!DOCTYPE html>")


@pytest.mark.parametrize("index", range(len(DOCUMENTS)))
def test_undamaged_documents_load_and_render(index: int) -> None:
    report = load_report(json.dumps(DOCUMENTS[index]))
    assert render_report(report).startswith("<!DOCTYPE html>")


def test_huge_block_time_still_renders() -> None:
    """Found by the long property run: a block time of 9.5e307 s overflowed the chart axis."""
    document = copy.deepcopy(DOCUMENTS[2])
    document["latency"]["block_times_s"][0] = 9.523809523809523e307
    report = load_report(json.dumps(document))
    assert "Block times too large to plot" in render_report(report)
    document["latency"]["block_times_s"][0] = 1e250  # large, but its axis is finite
    html = render_report(load_report(json.dumps(document)))
    assert 'aria-label="latency distribution over' in html
