"""crawl_module on locally built models: records, totals, state restoration, errors."""

from __future__ import annotations

import gc
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from torchscan_stages.analysis.crawl import crawl_module
from torchscan_stages.analysis.handlers import CallContext, ModuleHandler, register_handler
from torchscan_stages.analysis.operator_formulas import FORMULAS
from torchscan_stages.analysis.own_macs import MAC_FREE_OPERATORS as _MAC_FREE_OPERATORS
from torchscan_stages.report import AnalysisReport, IncompleteAnalysisError, MetricResult
from torchscan_stages.zoo import small_resnet, tiny_transformer


def mlp() -> nn.Sequential:
    return nn.Sequential(nn.Linear(10, 20), nn.ReLU(), nn.Linear(20, 5))


class DepthwiseTransposed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.dw = nn.Conv2d(4, 4, 3, padding=1, groups=4, bias=False)
        self.pw = nn.Conv2d(4, 8, 1, bias=False)
        self.up = nn.ConvTranspose2d(8, 2, 2, stride=2, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.up(self.pw(self.dw(x)))


class Recurrent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(4, 6, batch_first=True)
        self.gru = nn.GRU(6, 3, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.gru(self.lstm(x)[0])[0]


class Functional(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(5, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(x @ self.weight.t()) * 2


class CustomLeaf(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sin(x) + 1


class WithSharedAndCustom(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.shared = nn.Linear(6, 6)
        self.leaf = CustomLeaf()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.shared(self.leaf(self.shared(x)))


class TokenConv(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(50, 8)
        self.conv = nn.Conv1d(8, 4, 3, padding=1)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.conv(self.embed(tokens).transpose(1, 2))


def test_mlp_totals_and_records() -> None:
    report = crawl_module(mlp(), (10,))
    assert [(r.path, r.type) for r in report.layers] == [
        ("", "Sequential"),
        ("0", "Linear"),
        ("1", "ReLU"),
        ("2", "Linear"),
    ]
    # Linear 10->20: 2*200 + 20 = 420; ReLU 20; Linear 20->5: 2*100 + 5 = 205 -> 645
    assert report.totals.module_flops == MetricResult.complete(
        645, unit="FLOPs", scope="forward", method="module_formula"
    )
    assert report.totals.macs.value == 300  # 200 + 100
    # params 10*20+20 + 20*5+5 = 325
    assert report.totals.parameters.value == 325
    assert report.totals.parameter_bytes.value == 325 * 4
    # operator FLOPs from dispatch: addmm 2*200 + 2*100 = 600 (+ relu per B's convention),
    # never mixed into module FLOPs
    assert report.totals.operator_flops.method == "operator_dispatch"
    assert (report.totals.operator_flops.known_value or 0) >= 600
    assert report.layers[1].output is not None and report.layers[1].output.shape == [1, 20]
    assert report.inputs.items is not None and report.inputs.items[0].shape == [1, 10]


class _PlainResidual(nn.Module):
    """A residual block without a handler: its own add is arithmetic outside its children."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.conv(x) + x)


def test_residual_add_without_handler_is_partial() -> None:
    model = nn.Sequential(_PlainResidual(4), _PlainResidual(4))
    report = crawl_module(model, (4, 6, 6))
    # each block adds the residual itself: partial with an unsupported_module diagnostic
    assert report.totals.module_flops.status == "partial"
    # known lower bound: 2 convs x (4*36 outputs x 4*9 MACs x 2) + 2 relus x 144 = 20736+288
    assert report.totals.module_flops.known_value == 2 * (144 * 36 * 2) + 2 * 144
    assert {d.path for d in report.diagnostics if d.code == "unsupported_module"} == {"0", "1"}
    # the add does no multiply-accumulate, so MACs stay complete: 2 convs x 144 x 36 = 10368
    assert report.totals.macs.status == "complete" and report.totals.macs.value == 10368
    assert report.totals.dmas.status == "partial"
    block = next(d for d in report.diagnostics if d.path == "0")
    assert "MACs are complete" in block.message and block.metric == "module_flops,dmas"


class _ScaledByMatrix(nn.Module):
    """A container whose own forward runs a product: its MACs are unknown."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.mix = nn.Parameter(torch.eye(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x) @ self.mix


class _NormsItself(nn.Module):
    """A container that normalises in its own forward (affine MACs by the norm convention)."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.weight = nn.Parameter(torch.ones(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.layer_norm(self.proj(x), (4,), self.weight)


def test_own_products_give_macs_from_the_operators() -> None:
    report = crawl_module(_ScaledByMatrix(), (4,))
    # the Linear's 4*4 = 16 MACs, plus the container's own (1, 4) @ (4, 4) mm: 16 multiply-adds
    # read from the product it ran (method operator_fill) -> 32, complete with no user code
    assert report.totals.macs.status == "complete" and report.totals.macs.value == 32
    assert report.totals.macs.method == "module_formula+operator_fill"


def test_own_norms_leave_macs_incomplete() -> None:
    report = crawl_module(_NormsItself(), (4,))
    # the Linear's 4*4 = 16 MACs are known; the norm's affine MACs (its family's convention,
    # which its operator's product share does not carry) are not
    assert report.totals.macs.status == "partial" and report.totals.macs.known_value == 16


def test_resnet_style_cnn_complete_with_zoo_handler() -> None:
    report = crawl_module(small_resnet(), (3, 16, 16))
    # the zoo registers BasicBlock's own work (the residual add) as a handler
    assert report.totals.module_flops.status == "complete"
    assert not [d for d in report.diagnostics if d.code == "unsupported_module"]
    block = next(r for r in report.layers if r.path == "layer1")
    children = [r for r in report.layers if r.path.startswith("layer1.") and r.path.count(".") == 1]
    child_flops = sum(r.metrics.module_flops.value or 0 for r in children)
    # own add: 16 channels x 16 x 16 = 4096 FLOPs on top of the children
    assert block.metrics.module_flops.value == child_flops + 16 * 16 * 16
    stem = next(r for r in report.layers if r.path == "stem.0")
    # 3x3 conv 3->16 on 16x16: MACs = 16*256 * 3 * 9 = 110592
    assert stem.metrics.macs.value == 110592
    relu_calls = [r.call_index for r in report.layers if r.path == "layer1.relu"]
    assert relu_calls == [0, 1]  # one module called twice -> two records


def test_depthwise_transposed_net() -> None:
    report = crawl_module(DepthwiseTransposed(), (4, 5, 5))
    # dw: 4*25*1*9 = 900; pw: 8*25*4 = 800; up: input 8*25 * 2*4 = 1600 -> 3300 MACs
    assert report.totals.macs.value == 3300
    assert report.totals.module_flops.value == 6600  # no biases
    # RF chain: dw k3 -> 3; pw k1 -> 3; up stride 1/2, ceil(2/2)=1 -> 3; stride 0.5
    up = report.layers[-1].metrics
    assert (up.receptive_field.value, up.effective_stride.value) == (3, 0.5)


def test_transformer_encoder_complete() -> None:
    model = tiny_transformer(num_layers=2, d_model=16, nhead=2, dim_feedforward=32)
    report = crawl_module(model, args=(torch.zeros(1, 6, dtype=torch.long),))
    layers = [r for r in report.layers if r.type == "TransformerEncoderLayer"]
    assert len(layers) == 2 and all(r.inclusive for r in layers)
    # the root's own mean() is covered by the zoo's handler: 1*6*16 adds + 16 divides = 112
    root = report.layers[0]
    own = (root.metrics.module_flops.value or 0) - sum(
        r.metrics.module_flops.value or 0 for r in report.layers if r.depth == 1
    )
    assert (root.metrics.module_flops.status, own) == ("complete", 6 * 16 + 16)
    enc = next(r for r in report.layers if r.path == "encoder")
    assert enc.metrics.macs.status == "complete"
    assert enc.metrics.macs.value == 2 * (layers[0].metrics.macs.value or 0)  # children not doubled


def test_recurrent_model() -> None:
    report = crawl_module(Recurrent(), (5, 4))
    # LSTM: 5 steps * 4*6*(4+6) = 1200; GRU: 5 * 3*3*(6+3) = 405 -> 1605
    assert report.totals.macs.value == 1605
    assert report.totals.macs.status == "complete"


def test_functional_model_is_partial_never_zero() -> None:
    report = crawl_module(Functional(), (4,))
    flops = report.totals.module_flops
    assert flops.status == "unavailable"  # the root itself computes; nothing known
    diag = [d for d in report.diagnostics if d.code == "unsupported_module"]
    assert diag and diag[0].path == ""
    assert (report.totals.operator_flops.known_value or 0) >= 2 * 4 * 5  # mm 5x4 on one row


def test_custom_leaf_and_shared_module() -> None:
    model = WithSharedAndCustom()
    report = crawl_module(model, (6,))
    shared = [r for r in report.layers if r.path == "shared"]
    assert [r.call_index for r in shared] == [0, 1]
    assert shared[0].params.parameters == 42 and shared[1].params.shared_parameters == 42
    assert report.totals.parameters.value == 42  # 6*6 + 6, counted once
    leaf = next(r for r in report.layers if r.path == "leaf")
    assert leaf.metrics.module_flops.status == "unavailable"
    # known part: two Linear calls of 2*36 + 6 = 78 each -> lower bound 156
    assert report.totals.module_flops.status == "partial"
    assert report.totals.module_flops.known_value == 156
    assert any(d.code == "unsupported_module" and d.path == "leaf" for d in report.diagnostics)


def test_custom_handler_fills_gap_and_context() -> None:
    seen: list[CallContext] = []

    def sine_cost(ctx: CallContext) -> dict[str, Any]:
        seen.append(ctx)
        n = ctx.args[0].numel()
        return {"module_flops": 2 * n, "macs": 0}  # sin + add per element; dmas missing

    report = crawl_module(
        WithSharedAndCustom(), (6,), custom_modules={CustomLeaf: ModuleHandler(sine_cost)}
    )
    assert seen[0].path == "leaf" and seen[0].call_index == 0
    assert tuple(seen[0].output.shape) == (1, 6)
    # 156 + 12 = 168 complete; DMAs stay unavailable for the leaf -> partial total
    assert report.totals.module_flops.value == 168
    assert report.totals.dmas.status == "partial"
    assert any(d.code == "formula_unavailable" for d in report.diagnostics)


def test_inclusive_custom_handler_owns_subtree() -> None:
    handler = ModuleHandler(
        lambda ctx: {"module_flops": 1000, "macs": 10, "dmas": 5}, inclusive=True
    )
    report = crawl_module(
        WithSharedAndCustom(), (6,), custom_modules={WithSharedAndCustom: handler}
    )
    assert report.totals.module_flops.value == 1000  # children not added again
    assert len(report.layers) == 4  # children records still present


def test_failing_handler_diagnostic_and_strict() -> None:
    def broken(ctx: CallContext) -> dict[str, Any]:
        raise RuntimeError("boom")

    custom: dict[type[nn.Module], ModuleHandler] = {nn.ReLU: ModuleHandler(broken)}
    report = crawl_module(mlp(), (10,), custom_modules=custom)
    failed = [d for d in report.diagnostics if d.code == "handler_failed"]
    assert failed and "boom" in failed[0].message and failed[0].path == "1"
    assert report.totals.module_flops.status == "partial"
    with pytest.raises(IncompleteAnalysisError) as info:
        crawl_module(mlp(), (10,), custom_modules=custom, strict=True)
    assert "totals.module_flops" in str(info.value) and "handler_failed" in str(info.value)
    assert isinstance(info.value.report, AnalysisReport) and info.value.report.layers


def test_strict_passes_when_complete() -> None:
    report = crawl_module(mlp(), (10,), strict=True)
    assert report.totals.module_flops.is_complete


def test_structure_mode() -> None:
    report = crawl_module(small_resnet(), (3, 8, 8), mode="structure", strict=True)
    assert report.mode == "structure" and report.operator_flops is None
    assert report.totals.module_flops.status == "unavailable"
    assert report.totals.parameters.is_complete
    assert all(r.metrics.macs.status == "unavailable" for r in report.layers)
    assert any(d.code == "structure_mode" for d in report.diagnostics)


def test_embedding_conv1d_token_model() -> None:
    report = crawl_module(TokenConv(), (7,), dtype=torch.long)
    conv = next(r for r in report.layers if r.path == "conv")
    # 4*7 outputs * 8 * 3 = 672 MACs
    assert conv.metrics.macs.value == 672
    assert report.inputs.items is not None and report.inputs.items[0].dtype == "int64"
    # embedding rf 1 then conv k3 -> 3
    assert conv.metrics.receptive_field.value == 3


def _global_hook_state() -> dict[str, list[int]]:
    """Keys of every torch global module-hook dict (a crawl must leave none behind)."""
    import torch.nn.modules.module as module_globals

    return {
        name: sorted(getattr(module_globals, name))
        for name in dir(module_globals)
        if name.startswith("_global_") and isinstance(getattr(module_globals, name), dict)
    }


def test_no_global_hook_state_left_after_success_or_failure() -> None:
    before = _global_hook_state()
    crawl_module(mlp(), (10,))
    crawl_module(mlp(), (10,), mode="structure")
    with pytest.raises(RuntimeError):
        crawl_module(mlp(), (11,))  # wrong feature count: the first Linear raises
    assert _global_hook_state() == before


def test_state_restored_after_deep_shape_error() -> None:
    model = small_resnet()
    model.train()
    model.layer2.eval()  # mixed flags
    before = {name: m.training for name, m in model.named_modules()}
    grad = torch.is_grad_enabled()
    with pytest.raises(RuntimeError) as info:
        crawl_module(model, (5, 16, 16))  # wrong channel count: stem conv raises
    # torch's conv names the mismatch: "expected input[1, 5, 16, 16] to have 3 channels"
    assert "to have 3 channels, but got 5 channels instead" in str(info.value)
    assert {name: m.training for name, m in model.named_modules()} == before
    assert torch.is_grad_enabled() == grad
    for m in model.modules():
        assert not m._forward_hooks and not m._forward_pre_hooks
    # a later plain forward runs untouched by any dispatch mode
    model(torch.randn(1, 3, 8, 8))


def test_error_deep_inside_propagates_unchanged() -> None:
    class Bad(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            raise KeyError("deep")

    model = nn.Sequential(nn.Linear(3, 3), nn.Sequential(Bad()))
    with pytest.raises(KeyError, match="deep"):
        crawl_module(model, (3,))
    assert all(not m._forward_hooks for m in model.modules())


def test_flags_and_grad_restored_after_success() -> None:
    model = mlp().train()
    model[1].eval()
    crawl_module(model, (10,))
    assert model.training and model[0].training and not model[1].training


@pytest.mark.parametrize(
    "kwargs,error,word",
    [
        ({"input_shape": (10,), "args": (torch.randn(1, 10),)}, ValueError, "input_shape"),
        ({"input_shape": "10"}, TypeError, "input_shape"),
        ({"input_shape": (10.0,)}, TypeError, "input_shape"),
        ({"input_shape": [(10,), (10,)], "dtype": [torch.float32]}, ValueError, "dtype"),
        ({"input_shape": (10,), "mode": "fast"}, ValueError, "mode"),
        ({"args": (torch.randn(1, 10),), "dtype": torch.float64}, ValueError, "dtype"),
        ({"input_shape": (10,), "custom_modules": {int: None}}, TypeError, "custom_modules"),
        ({"input_shape": (10,), "custom_mapping": {"mm": len}}, TypeError, "custom_mapping"),
        ({"custom_mapping": {"mm": len}}, TypeError, "custom_mapping"),  # no input: checked too
    ],
)
def test_bad_arguments_before_forward(kwargs: dict[str, Any], error: type, word: str) -> None:
    calls: list[int] = []
    model = mlp()
    model.register_forward_pre_hook(lambda *a: calls.append(1))
    with pytest.raises(error, match=word):
        crawl_module(model, **kwargs)
    assert calls == []


def test_non_module_rejected() -> None:
    with pytest.raises(TypeError, match="module"):
        crawl_module(lambda x: x, (3,))  # type: ignore[arg-type]


def test_args_forwarded_unchanged_and_kwargs() -> None:
    class Keyed(nn.Module):
        def forward(self, x: torch.Tensor, *, scale: torch.Tensor) -> torch.Tensor:
            assert x is tensor and scale is factor
            return x

    tensor, factor = torch.randn(2, 3, dtype=torch.float64), torch.ones(1)
    report = crawl_module(Keyed(), args=(tensor,), kwargs={"scale": factor})
    assert report.inputs.keys == ["args", "kwargs"]


def test_deterministic_json() -> None:
    first = crawl_module(small_resnet(), (3, 8, 8)).model_dump_json()
    second = crawl_module(small_resnet(), (3, 8, 8)).model_dump_json()
    assert first == second


def test_registry_refuses_bad_and_duplicate_keys() -> None:
    with pytest.raises(TypeError):
        register_handler(int)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="Linear"):
        register_handler(nn.Linear)
    with pytest.raises(TypeError):
        register_handler()


def test_subclass_resolves_through_mro() -> None:
    class MyLinear(nn.Linear):
        pass

    report = crawl_module(MyLinear(4, 2), (4,))
    # 2*8 + 2 = 18
    assert report.layers[0].metrics.module_flops.value == 18


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_absent_device_is_a_clear_value_error() -> None:
    model = nn.Linear(3, 3)
    with pytest.raises(ValueError, match=r"device='cuda' was requested but CUDA is not available"):
        crawl_module(model, (3,), device="cuda")
    with pytest.raises(ValueError, match="not a valid torch device"):
        crawl_module(model, (3,), device="warp-drive")


class _UpsamplesItself(nn.Module):
    """Bilinear interpolation in its own forward: nn.Upsample's formula counts MACs for it."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 2, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.interpolate(self.conv(x), scale_factor=2, mode="bilinear")


class _AffineLeaf(nn.Module):
    """x * g + b in a leaf, outside any norm: element-wise FLOPs, no tensor product."""

    def __init__(self) -> None:
        super().__init__()
        self.g = nn.Parameter(torch.ones(4))
        self.b = nn.Parameter(torch.zeros(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.g + self.b


def test_own_interpolation_and_affine_macs_follow_their_conventions() -> None:
    up = crawl_module(_UpsamplesItself(), (2, 3, 3))
    # the 1x1 conv: 2*9 outputs * 2 inputs = 36 MACs; its own bilinear interpolation at
    # nn.Upsample's 3 MACs per output element: 2 x 6 x 6 = 72 outputs -> 216; total 252
    assert up.totals.macs.status == "complete" and up.totals.macs.value == 36 + 216
    affine = crawl_module(_AffineLeaf(), (4,))
    # separate element-wise mul and add outside any norm are FLOPs, not MACs: its own
    # operators ran no tensor product, so 0 MACs (method operator_fill), FLOPs unavailable
    assert (affine.totals.macs.status, affine.totals.macs.value) == ("complete", 0)
    assert affine.totals.macs.method == "operator_fill"
    assert affine.totals.module_flops.status == "unavailable"


def test_mac_free_operators_all_have_builtin_formulas() -> None:
    known = {str(packet) for packet in FORMULAS}
    assert known >= _MAC_FREE_OPERATORS, sorted(_MAC_FREE_OPERATORS - known)


@pytest.mark.parametrize("collecting", [True, False])
def test_garbage_collector_state_is_restored(collecting: bool) -> None:
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    was = gc.isenabled()
    (gc.enable if collecting else gc.disable)()
    try:
        crawl_module(model, (4,))
        assert gc.isenabled() is collecting
        with pytest.raises(RuntimeError):
            crawl_module(model, (5,))  # wrong width: the forward raises
        assert gc.isenabled() is collecting
    finally:
        (gc.enable if was else gc.disable)()
