"""MultiheadAttention (inclusive: its out_proj child is never called as a module).

Convention (N batch, L queries, S keys, E embed dim, H heads): MACs = projections
N*L*E*E (q) + N*S*kdim*E (k) + N*S*vdim*E (v) + scores N*L*S*E + weighted values N*L*S*E +
output projection N*L*E*E. FLOPs = 2 x MACs + projection biases (one add per projected
element) + query scaling (N*L*E) + softmax (5 per score: max, subtract, exp, sum, divide,
N*H*L*S scores) + mask add (1 per score when a mask is given) + head averaging of returned
weights (N*L*S*H when need_weights and average_attn_weights). add_bias_kv/add_zero_attn each
add one key position. Dropout is 0 in evaluation mode. DMAs = query, key, value, parameters and
outputs (attention weights included when returned); intermediates are not counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch import nn

from ..handlers import CallContext, register_handler
from ._common import arg, param_numel


@dataclass(frozen=True)
class AttentionShape:
    batch: int
    queries: int
    keys: int
    embed: int
    kdim: int
    vdim: int
    heads: int


def mha_cost(
    shape: AttentionShape,
    *,
    in_bias: bool,
    out_bias: bool,
    extra_keys: int = 0,
    masked: bool = False,
    weights_averaged: bool = False,
) -> tuple[int, int]:
    """(FLOPs, MACs) of one multi-head attention call; see the module docstring."""
    n, length, s0, e = shape.batch, shape.queries, shape.keys, shape.embed
    s = s0 + extra_keys
    macs = n * length * e * e + n * s0 * shape.kdim * e + n * s0 * shape.vdim * e
    macs += 2 * n * length * s * e + n * length * e * e
    flops = 2 * macs
    if in_bias:
        flops += n * length * e + 2 * n * s0 * e
    if out_bias:
        flops += n * length * e
    scores = n * shape.heads * length * s
    flops += n * length * e + 5 * scores + (scores if masked else 0)
    if weights_averaged:
        flops += n * length * s * shape.heads
    return flops, macs


def _mha_shape(module: nn.MultiheadAttention, query: Any, key: Any) -> AttentionShape:
    batched = query.dim() == 3
    if not batched:
        batch, queries, keys = 1, query.shape[0], key.shape[0]
    elif module.batch_first:
        batch, queries, keys = query.shape[0], query.shape[1], key.shape[1]
    else:
        batch, queries, keys = query.shape[1], query.shape[0], key.shape[0]
    return AttentionShape(
        batch, queries, keys, module.embed_dim, module.kdim, module.vdim, module.num_heads
    )


def mha_module_cost(
    module: nn.MultiheadAttention, query: Any, key: Any, *, masked: bool, averaged: bool
) -> tuple[int, int]:
    shape = _mha_shape(module, query, key)
    extra = int(module.bias_k is not None) + int(module.add_zero_attn)
    return mha_cost(
        shape,
        in_bias=module.in_proj_bias is not None,
        out_bias=module.out_proj.bias is not None,
        extra_keys=extra,
        masked=masked,
        weights_averaged=averaged,
    )


@register_handler(nn.MultiheadAttention, inclusive=True)
def multihead_attention(ctx: CallContext) -> dict[str, Any]:
    module = ctx.module
    assert isinstance(module, nn.MultiheadAttention)
    query, key, value = (
        arg(ctx.args, ctx.kwargs, 0, "query"),
        arg(ctx.args, ctx.kwargs, 1, "key"),
        arg(ctx.args, ctx.kwargs, 2, "value"),
    )
    masked = (
        arg(ctx.args, ctx.kwargs, 3, "key_padding_mask") is not None
        or arg(ctx.args, ctx.kwargs, 5, "attn_mask") is not None
    )
    masked = masked or bool(arg(ctx.args, ctx.kwargs, 7, "is_causal", False))
    need_weights = bool(arg(ctx.args, ctx.kwargs, 4, "need_weights", True))
    average = bool(arg(ctx.args, ctx.kwargs, 6, "average_attn_weights", True))
    flops, macs = mha_module_cost(
        module, query, key, masked=masked, averaged=need_weights and average
    )
    out, weights = ctx.output
    dmas = query.numel() + key.numel() + value.numel() + param_numel(module)
    dmas += module.out_proj.weight.numel() + (
        module.out_proj.bias.numel() if module.out_proj.bias is not None else 0
    )
    dmas += out.numel() + (weights.numel() if weights is not None else 0)
    return {"module_flops": flops, "macs": macs, "dmas": dmas}
