"""Linear and Bilinear.

Convention: MAC = one multiply-accumulate; FLOPs = 2 x MACs + one add per output element for
the bias. DMAs = elements read (input, weight, bias) + written (output), each once. A weight
held as a quantized tensor subclass (torchao int8 / int4 / fp8) dequantises or rescales on
top of that, as its kernel chooses: module FLOPs are then the float formula as a lower bound
(the operator FLOPs count the rest), MACs and DMAs unchanged.
"""

from __future__ import annotations

from math import prod
from typing import Any

from torch import nn

from ...report import MetricResult
from ..handlers import CallContext, register_handler
from ..packed_params import inner_storages
from ._common import in_out, note, param_numel, pointwise_rf


def linear_cost(rows: int, in_features: int, out_features: int, bias: bool) -> tuple[int, int]:
    """(FLOPs, MACs) of ``rows`` vectors through a dense layer."""
    macs = rows * in_features * out_features
    return 2 * macs + (rows * out_features if bias else 0), macs


@register_handler(nn.Linear)
def linear(ctx: CallContext) -> dict[str, Any]:
    module = ctx.module
    assert isinstance(module, nn.Linear)
    x, y = in_out(ctx)
    rows = prod(x.shape[:-1])
    flops, macs = linear_cost(
        rows, module.in_features, module.out_features, module.bias is not None
    )
    result: dict[str, Any] = {
        "module_flops": flops,
        "macs": macs,
        "dmas": x.numel() + param_numel(module) + y.numel(),
        **pointwise_rf(),
    }
    if inner_storages(module.weight):
        result["module_flops"] = MetricResult.partial(
            flops, unit="FLOPs", scope="forward", method="module_formula"
        )
        result["diagnostics"] = [
            note(
                "formula_partial",
                f"a {type(module.weight).__name__} weight: its dequantisation or rescale is "
                "not in the float Linear formula (the operator FLOPs count it)",
                "module_flops",
            )
        ]
    return result


def bilinear_cost(rows: int, in1: int, in2: int, out_features: int, bias: bool) -> tuple[int, int]:
    """(FLOPs, MACs): per output feature, x1 @ A_k (in1*in2 MACs) then a dot with x2 (in2)."""
    macs = rows * out_features * in2 * (in1 + 1)
    return 2 * macs + (rows * out_features if bias else 0), macs


@register_handler(nn.Bilinear)
def bilinear(ctx: CallContext) -> dict[str, Any]:
    module = ctx.module
    assert isinstance(module, nn.Bilinear)
    x1, x2 = ctx.args[0], ctx.args[1]
    y = ctx.output
    rows = prod(x1.shape[:-1])
    flops, macs = bilinear_cost(
        rows,
        module.in1_features,
        module.in2_features,
        module.out_features,
        module.bias is not None,
    )
    return {
        "module_flops": flops,
        "macs": macs,
        "dmas": x1.numel() + x2.numel() + param_numel(module) + y.numel(),
    }
