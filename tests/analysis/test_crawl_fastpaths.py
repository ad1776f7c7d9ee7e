"""The crawl's shortcuts give what the plain paths give (records, metrics, flags, metadata)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from torchscan_stages.analysis._walk import named_modules
from torchscan_stages.analysis.crawl import crawl_module
from torchscan_stages.analysis.handlers import METHOD, SCOPE, CallContext, ModuleHandler
from torchscan_stages.analysis.layer_sums import sum_metric
from torchscan_stages.analysis.module_formulas._common import subtree_param_numel
from torchscan_stages.analysis.module_formulas.conv import conv_rf
from torchscan_stages.analysis.tensor_meta import (
    call_capture,
    call_meta,
    capture,
    meta_of,
    to_value_meta,
)
from torchscan_stages.report import LayerRecord, MetricResult, combine_sum


class CountingTrain(nn.Sequential):
    """A container whose train() does more than set flags: crawl must call it."""

    calls = 0

    def train(self, mode: bool = True) -> CountingTrain:
        type(self).calls += 1
        return super().train(mode)


def test_train_override_is_called_and_flags_restored() -> None:
    model = CountingTrain(nn.Linear(4, 4), nn.Dropout(0.5), nn.Linear(4, 2)).train()
    model[1].eval()
    before = CountingTrain.calls
    crawl_module(model, (4,))
    assert CountingTrain.calls == before + 1  # the real module.eval() ran once
    assert model.training and model[0].training and not model[1].training


@pytest.mark.parametrize("mode", ["full", "structure"])
def test_plain_modules_eval_during_crawl_and_restored(mode: str) -> None:
    seen: list[bool] = []

    class Probe(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            seen.append(self.training)
            return x

    model = nn.Sequential(nn.Linear(3, 3), Probe()).train()
    crawl_module(model, (3,), mode=mode)  # type: ignore[arg-type]
    assert seen == [False]  # evaluation mode inside the crawl
    assert all(m.training for m in model.modules())  # training flags as found


@pytest.mark.parametrize("mode", ["full", "structure"])
def test_records_are_valid_models_with_every_field_set(mode: str) -> None:
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten())
    report = crawl_module(model, (3, 8, 8), mode=mode)  # type: ignore[arg-type]
    for record in report.layers:
        assert LayerRecord.model_validate(record.model_dump()) == record
        assert record.model_fields_set == set(LayerRecord.model_fields)
        assert record.params.model_fields_set == set(type(record.params).model_fields)
    # an assignment on one record changes only that record
    first, second = report.layers[0], report.layers[1]
    first.name = "renamed"
    assert second.name == "0" and first.model_fields_set == set(LayerRecord.model_fields)


def _metric(status: str, value: int, method: str = METHOD) -> MetricResult:
    if status == "complete":
        return MetricResult.complete(value, unit="MACs", scope=SCOPE, method=method)
    if status == "partial":
        return MetricResult.partial(value, unit="MACs", scope=SCOPE, method=method)
    return MetricResult.unavailable(unit="MACs", scope=SCOPE, method=method)


@pytest.mark.parametrize(
    "parts",
    [
        [("complete", 3), ("complete", 4)],  # 3 + 4 = 7, complete
        [("complete", 3), ("partial", 4)],  # lower bound 7
        [("unavailable", 0), ("unavailable", 0)],  # nothing known
        [("complete", 0), ("complete", 0), ("complete", 5)],  # 5
    ],
)
def test_sum_metric_shortcut_matches_combine_sum(parts: list[tuple[str, int]]) -> None:
    results = [_metric(s, v) for s, v in parts]
    assert sum_metric("macs", results) == combine_sum(
        results, unit="MACs", scope=SCOPE, method=METHOD
    )


def test_sum_metric_refuses_another_unit() -> None:
    wrong = MetricResult.complete(3, unit="FLOPs", scope=SCOPE, method=METHOD)
    with pytest.raises(ValueError, match="different unit"):
        sum_metric("macs", [_metric("complete", 1), wrong])


@pytest.mark.parametrize(
    "value",
    [
        torch.zeros(2, 3),
        (torch.zeros(2, 3, dtype=torch.int64),),
        (torch.zeros(1), torch.zeros(2)),
        [torch.zeros(1)],
        {"a": torch.zeros(1)},
        None,
        torch.empty(4, 5, device="meta"),
    ],
)
def test_meta_of_matches_capture(value: object) -> None:
    assert meta_of(value) == to_value_meta(capture(value))
    assert meta_of(value) is meta_of(value)  # shared instances


class Flag(int):
    """An int subclass: capture names its type, so the flat key must not merge it with int."""


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        ((torch.zeros(2, 3),), {"mask": None, "is_causal": False}),
        ((torch.zeros(2, 3),), {"mask": None, "is_causal": 1}),  # int, not bool
        ((torch.zeros(2, 3),), {"mask": None, "is_causal": Flag(1)}),  # a subclass: plain path
        ((torch.zeros(2, 3),), {"is_causal": False, "mask": None}),  # another key order
        ((torch.zeros(2, 3), None), {"scale": 0.5, "name": "x"}),
        ((torch.zeros(2, 3, requires_grad=True),), {"mask": torch.ones(3, dtype=torch.bool)}),
        ((), {"x": torch.zeros(1), "pair": (torch.zeros(1), torch.zeros(2))}),  # plain path
        ((torch.zeros(1),), {"opts": {"a": 1}}),  # a dict argument: plain path
    ],
)
def test_call_meta_matches_call_capture(
    args: tuple[object, ...], kwargs: dict[str, object]
) -> None:
    expected = to_value_meta(call_capture(args, kwargs))
    assert call_meta(args, kwargs) == expected
    assert call_meta(args, kwargs) == expected  # and again, from the memo


def test_call_meta_keys_by_type_and_order() -> None:
    x = torch.zeros(2)
    metas = [
        call_meta((x,), {"a": None, "b": False}),
        call_meta((x,), {"a": None, "b": 0}),
        call_meta((x,), {"b": False, "a": None}),
        call_meta((x,), {"a": None, "b": Flag(0)}),
        call_meta((x, None), {"b": False}),
    ]
    # five different calls: bool vs int vs int subclass, key order, a positional None
    assert len({m.model_dump_json() for m in metas}) == 5


def test_structure_mode_records_kwargs_inputs() -> None:
    class Scale(nn.Module):
        def forward(self, x: torch.Tensor, *, factor: float = 1.0) -> torch.Tensor:
            return x * factor

    report = crawl_module(Scale(), args=(torch.zeros(2),), kwargs={"factor": 2.0}, mode="structure")
    assert report.layers[0].input.kind == "dict"
    assert report.layers[0].input.keys == ["args", "kwargs"]


def test_handler_context_is_a_regular_call_context() -> None:
    seen: list[CallContext] = []

    def spy(ctx: CallContext) -> dict[str, int]:
        seen.append(ctx)
        return {"module_flops": 0, "macs": 0, "dmas": 0}

    x = torch.zeros(1, 3)
    model = nn.Sequential(nn.Identity())
    crawl_module(model, args=(x,), custom_modules={nn.Identity: ModuleHandler(spy)})
    (ctx,) = seen
    rebuilt = CallContext(ctx.module, "0", 0, ctx.args, {}, ctx.output, ctx.operators)
    assert ctx == rebuilt and ctx.path == "0" and ctx.call_index == 0
    with pytest.raises(AttributeError):
        ctx.path = "x"  # type: ignore[misc]  # still frozen
    assert ctx.own_operators() is not None  # mode="full": the call's own operators


def test_conv_rf_memo_is_per_configuration_and_copied() -> None:
    a = nn.Conv2d(1, 1, 3, stride=2, padding=1)
    b = nn.Conv2d(1, 1, 5, dilation=2)
    # a: kernel 3, stride 2, padding 1; b: dilated kernel 2*(5-1)+1 = 9, stride 1, padding 0
    assert conv_rf(a) == {"receptive_field": 3, "effective_stride": 2, "effective_padding": 1}
    assert conv_rf(b) == {"receptive_field": 9, "effective_stride": 1, "effective_padding": 0}
    conv_rf(a)["receptive_field"] = 99  # the caller's copy
    assert conv_rf(a)["receptive_field"] == 3
    a.padding = [2, 2]  # type: ignore[assignment]  # unhashable: computed without the memo
    assert conv_rf(a)["effective_padding"] == 2


def test_subtree_param_numel_counts_each_tensor_once() -> None:
    shared = nn.Linear(3, 3)  # 3*3 + 3 = 12
    model = nn.Sequential(shared, nn.Sequential(shared, nn.Linear(3, 2)), nn.ReLU())
    # 12 (shared, once) + 3*2 + 2 = 20
    assert subtree_param_numel(model) == sum(p.numel() for p in model.parameters()) == 20


def test_subtree_param_numel_skips_none_children_and_shared_parameters() -> None:
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2, bias=False))
    model.add_module("gone", None)
    model[1].weight = model[0].weight  # tied: counted once
    # Linear(2, 2): 2*2 + 2 = 6; the tied weight adds nothing
    assert subtree_param_numel(model) == sum(p.numel() for p in model.parameters()) == 6


class NamedOverride(nn.Sequential):
    """A container whose named_modules() hides a child: the walk must defer to it."""

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):  # type: ignore[no-untyped-def]
        for name, sub in super().named_modules(memo, prefix, remove_duplicate):
            if not isinstance(sub, nn.ReLU):
                yield name, sub


def _shared_tree() -> nn.Module:
    shared = nn.Linear(3, 3)
    inner = nn.Sequential(shared, nn.Sequential(nn.ReLU(), shared), nn.Identity())
    model = nn.Sequential(inner, nn.ModuleDict({"a": shared, "b": nn.Tanh()}), inner)
    model.add_module("empty", None)
    return model


@pytest.mark.parametrize(
    "build",
    [
        _shared_tree,  # shared modules keep their first path; a None child is skipped
        lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, batch_first=True), 2),
        lambda: nn.Sequential(nn.Linear(2, 2), NamedOverride(nn.ReLU(), nn.Linear(2, 2))),
        lambda: NamedOverride(nn.ReLU(), nn.Linear(2, 2)),
    ],
)
def test_walk_equals_named_modules(build: object) -> None:
    model = build()  # type: ignore[operator]
    expected = list(model.named_modules())
    got = named_modules(model)
    assert [p for p, _ in got] == [p for p, _ in expected]
    assert all(a is b for (_, a), (_, b) in zip(got, expected, strict=True))


class Half(nn.Module):
    """Returns x / 2; its test handler gives ints, a float or no DMAs depending on the call."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / 2


def _half_handler(ctx: CallContext) -> dict[str, object]:
    n = ctx.args[0].numel()
    if ctx.path == "3":
        return {"module_flops": float(n), "macs": 0}  # a float equal to the int of "0"
    return {"module_flops": n, "macs": 0}  # no dmas: formula_unavailable, once per path


def test_handler_memo_equals_plain_path(monkeypatch: pytest.MonkeyPatch) -> None:
    from torchscan_stages.analysis import own_parts

    model = nn.Sequential(
        *[
            nn.Sequential(nn.Conv2d(4, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU())
            for _ in range(3)
        ],
        Half(),
        Half(),
    )
    custom = {Half: ModuleHandler(_half_handler)}
    x = torch.rand(1, 4, 8, 8)
    memo = crawl_module(model, args=(x,), custom_modules=custom)
    monkeypatch.setattr(own_parts, "_memo_key", lambda call: None)
    plain = crawl_module(model, args=(x,), custom_modules=custom)
    assert memo.model_dump(exclude={"provenance"}) == plain.model_dump(exclude={"provenance"})
    by_path = {layer.path: layer for layer in memo.layers}
    # Half at "3" and "4": 4*8*8 = 256 divisions each; a float at "3", an int at "4"
    assert by_path["3"].metrics.module_flops.value == 256.0
    assert type(by_path["3"].metrics.module_flops.value) is float
    assert type(by_path["4"].metrics.module_flops.value) is int
    missing = [d.path for d in memo.diagnostics if d.code == "formula_unavailable"]
    assert missing == ["3", "4"]
