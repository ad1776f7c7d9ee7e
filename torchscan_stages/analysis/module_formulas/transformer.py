"""TransformerEncoderLayer and TransformerDecoderLayer (inclusive of their children).

A layer is counted as one unit so that PyTorch's fused fast path (which never calls the child
modules) and the regular path give the same numbers. Convention: self-attention (and, for a
decoder, cross-attention) as MultiheadAttention with need_weights=False; feed-forward =
linear1 + activation + linear2 (Linear convention); each LayerNorm per the norm convention;
each residual add 1 FLOP per element; dropout 0 in evaluation mode. An activation that is not
a known module or torch.nn.functional relu/gelu makes FLOPs a partial lower bound.
DMAs = layer inputs + parameters + output.
"""

from __future__ import annotations

from math import prod
from typing import Any

import torch.nn.functional as F
from torch import nn

from ...report import MetricResult
from ..handlers import CallContext, register_handler
from ._common import arg, note, subtree_param_numel
from .activation import activation_flops
from .attention import mha_module_cost
from .linear import linear_cost
from .norm import norm_cost

_FUNCTIONAL_ACTIVATIONS: dict[Any, int] = {F.relu: 1, F.gelu: 5}


def _activation_cost(activation: Any) -> int | None:
    if isinstance(activation, nn.Module):
        return activation_flops(activation)
    if activation is F.gelu:
        return 5
    return _FUNCTIONAL_ACTIVATIONS.get(activation)


def _ffn_and_norms(layer: nn.Module, rows: int, norms: list[nn.LayerNorm]) -> tuple[int, int]:
    linear1, linear2 = layer.linear1, layer.linear2
    assert isinstance(linear1, nn.Linear) and isinstance(linear2, nn.Linear)
    f1, m1 = linear_cost(rows, linear1.in_features, linear1.out_features, linear1.bias is not None)
    f2, m2 = linear_cost(rows, linear2.in_features, linear2.out_features, linear2.bias is not None)
    flops, macs = f1 + f2, m1 + m2
    width = linear1.in_features
    for norm in norms:
        nf, nm = norm_cost(
            rows * width,
            rows,
            data_stats=True,
            weight=norm.weight is not None,
            bias=getattr(norm, "bias", None) is not None,
        )
        flops, macs = flops + nf, macs + nm
    return flops, macs


def _finish(
    layer: nn.Module, flops: int, macs: int, x: Any, out: Any, extra_inputs: int, hidden: int
) -> dict[str, Any]:
    act = _activation_cost(layer.activation)
    dmas = x.numel() + extra_inputs + subtree_param_numel(layer) + out.numel()
    result: dict[str, Any] = {"macs": macs, "dmas": dmas}
    if act is None:
        result["module_flops"] = MetricResult.partial(
            flops, unit="FLOPs", scope="forward", method="module_formula"
        )
        result["diagnostics"] = [
            note(
                "formula_partial",
                f"activation {layer.activation!r} has no known cost; FLOPs are a lower bound",
                "module_flops",
            )
        ]
    else:
        result["module_flops"] = flops + act * hidden
    return result


@register_handler(nn.TransformerEncoderLayer, inclusive=True)
def encoder_layer(ctx: CallContext) -> dict[str, Any]:
    layer = ctx.module
    assert isinstance(layer, nn.TransformerEncoderLayer)
    src = arg(ctx.args, ctx.kwargs, 0, "src")
    masked = (
        arg(ctx.args, ctx.kwargs, 1, "src_mask") is not None
        or arg(ctx.args, ctx.kwargs, 2, "src_key_padding_mask") is not None
    )
    masked = masked or bool(arg(ctx.args, ctx.kwargs, 3, "is_causal", False))
    rows = prod(src.shape[:-1])
    flops, macs = mha_module_cost(layer.self_attn, src, src, masked=masked, averaged=False)
    f, m = _ffn_and_norms(layer, rows, [layer.norm1, layer.norm2])
    flops, macs = flops + f + 2 * src.numel(), macs + m  # + two residual adds
    hidden = rows * layer.linear1.out_features
    return _finish(layer, flops, macs, src, ctx.output, 0, hidden)


@register_handler(nn.TransformerDecoderLayer, inclusive=True)
def decoder_layer(ctx: CallContext) -> dict[str, Any]:
    layer = ctx.module
    assert isinstance(layer, nn.TransformerDecoderLayer)
    tgt, memory = arg(ctx.args, ctx.kwargs, 0, "tgt"), arg(ctx.args, ctx.kwargs, 1, "memory")
    self_masked = any(
        arg(ctx.args, ctx.kwargs, i, n) is not None
        for i, n in ((2, "tgt_mask"), (4, "tgt_key_padding_mask"))
    ) or bool(arg(ctx.args, ctx.kwargs, 6, "tgt_is_causal", False))
    cross_masked = any(
        arg(ctx.args, ctx.kwargs, i, n) is not None
        for i, n in ((3, "memory_mask"), (5, "memory_key_padding_mask"))
    ) or bool(arg(ctx.args, ctx.kwargs, 7, "memory_is_causal", False))
    rows = prod(tgt.shape[:-1])
    f1, m1 = mha_module_cost(layer.self_attn, tgt, tgt, masked=self_masked, averaged=False)
    f2, m2 = mha_module_cost(layer.multihead_attn, tgt, memory, masked=cross_masked, averaged=False)
    f3, m3 = _ffn_and_norms(layer, rows, [layer.norm1, layer.norm2, layer.norm3])
    flops = f1 + f2 + f3 + 3 * tgt.numel()  # + three residual adds
    hidden = rows * layer.linear1.out_features
    return _finish(layer, flops, m1 + m2 + m3, tgt, ctx.output, memory.numel(), hidden)
