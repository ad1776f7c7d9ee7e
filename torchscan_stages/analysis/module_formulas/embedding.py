"""Embedding and EmbeddingBag.

Convention: a lookup is data movement, 0 FLOPs and 0 MACs. EmbeddingBag reduces each bag:
sum/max = (rows - bags) x dim adds/compares, mean adds bags x dim divides, per-sample weights
add rows x dim multiply-accumulates (rows x dim MACs, 2 FLOPs each instead of the plain add).
``max_norm`` renormalises looked-up rows in place: its cost is not modelled, so FLOPs become a
partial lower bound with a diagnostic. DMAs = indices (+ offsets, weights) read + rows
gathered (rows x dim) + output written. An embedding keeps sequence positions (receptive
field 1, stride 1, padding 0).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ...report import MetricResult
from ..handlers import CallContext, register_handler
from ._common import arg, first_tensor, note, pointwise_rf


def _max_norm_partial(flops: int) -> MetricResult:
    return MetricResult.partial(flops, unit="FLOPs", scope="forward", method="module_formula")


def _has_table(module: nn.Module) -> bool:
    weight = getattr(module, "weight", None)
    return isinstance(weight, torch.Tensor) and weight.dim() == 2


@register_handler(
    nn.Embedding,
    accepts=_has_table,
    expects="an embedding table `weight` of shape (rows, dim) and a tensor output of "
    "looked-up rows (..., dim)",
)
def embedding(ctx: CallContext) -> dict[str, Any]:
    """A table lookup: 0 FLOPs; indices + rows gathered + output written.

    A subclass whose forward takes something else than the indices (Pegasus/Marian's
    sinusoidal positions take the input shape and build the positions themselves) still
    looks up one row per output row: the indices are then the output's rows.
    """
    module = ctx.module
    width = int(module.weight.shape[-1])  # type: ignore[index]
    out = first_tensor(ctx.output)
    if out is None or out.shape[-1] != width:
        raise TypeError(
            f"{type(module).__name__} returned {None if out is None else tuple(out.shape)}, "
            f"not rows of its table's width {width}"
        )
    indices = first_tensor(ctx.args) if ctx.args else first_tensor(ctx.kwargs)
    is_index = indices is not None and not indices.is_floating_point()
    looked_up = indices.numel() if is_index else out.numel() // out.shape[-1]  # type: ignore[union-attr]
    result: dict[str, Any] = {
        "module_flops": 0,
        "macs": 0,
        "dmas": looked_up + 2 * out.numel(),
        **pointwise_rf(),
    }
    if module.max_norm is not None:
        result["module_flops"] = _max_norm_partial(0)
        result["diagnostics"] = [
            note(
                "formula_partial",
                "Embedding(max_norm=...) renormalisation is not counted",
                "module_flops",
            )
        ]
    return result


def bag_cost(
    rows: int, bags: int, dim: int, mode: str, per_sample_weights: bool
) -> tuple[int, int]:
    """(FLOPs, MACs) of reducing ``rows`` gathered rows of width ``dim`` into ``bags`` bags."""
    if per_sample_weights:
        # weighted sum: one multiply-accumulate per gathered element
        return 2 * rows * dim, rows * dim
    flops = (rows - bags) * dim if rows > bags else 0
    if mode == "mean":
        flops += bags * dim
    return flops, 0


@register_handler(nn.EmbeddingBag)
def embedding_bag(ctx: CallContext) -> dict[str, Any]:
    module = ctx.module
    assert isinstance(module, nn.EmbeddingBag)
    indices = arg(ctx.args, ctx.kwargs, 0, "input")
    offsets = arg(ctx.args, ctx.kwargs, 1, "offsets")
    weights = arg(ctx.args, ctx.kwargs, 2, "per_sample_weights")
    out = first_tensor(ctx.output)
    assert indices is not None and out is not None
    rows = indices.numel()
    bags = out.shape[0] if out.dim() == 2 else 1
    flops, macs = bag_cost(rows, bags, module.embedding_dim, module.mode, weights is not None)
    dmas = rows + rows * module.embedding_dim + out.numel()
    dmas += offsets.numel() if offsets is not None else 0
    dmas += weights.numel() if weights is not None else 0
    result: dict[str, Any] = {"module_flops": flops, "macs": macs, "dmas": dmas}
    if module.max_norm is not None:
        result["module_flops"] = _max_norm_partial(flops)
        result["diagnostics"] = [
            note(
                "formula_partial",
                "EmbeddingBag(max_norm=...) renormalisation is not counted",
                "module_flops",
            )
        ]
    return result
