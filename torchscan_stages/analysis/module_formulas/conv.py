"""Conv1d/2d/3d and ConvTranspose1d/2d/3d (groups, dilation, stride, output padding).

Convention: MACs = (output elements) x (in_channels / groups) x prod(kernel) for a convolution;
a transposed convolution scatters every *input* element through (out_channels / groups) x
prod(kernel) weights, so its MACs use the input elements. Stride and output padding only place
results: they never multiply the count (the stride-squared over-count of naive formulas comes
from using output positions for a transposed convolution). FLOPs = 2 x MACs + one add per
output element for the bias. DMAs = input + weight + bias + output elements, each once.
Receptive field: dilated kernel d*(k-1)+1, stride and padding, maximum over spatial dims.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import ceil, floor, prod
from typing import Any

from torch import nn
from torch.nn.modules.conv import _ConvNd

from ..handlers import CallContext, register_handler
from ._common import in_out, param_numel


def conv_cost(
    out_elements: int, in_channels: int, groups: int, kernel: Sequence[int], bias: bool
) -> tuple[int, int]:
    """(FLOPs, MACs) of a convolution producing ``out_elements`` (N x C_out x spatial)."""
    macs = out_elements * (in_channels // groups) * prod(kernel)
    return 2 * macs + (out_elements if bias else 0), macs


def conv_transpose_cost(
    in_elements: int,
    out_elements: int,
    out_channels: int,
    groups: int,
    kernel: Sequence[int],
    bias: bool,
) -> tuple[int, int]:
    """(FLOPs, MACs) of a transposed convolution: input elements x (C_out/groups) x kernel."""
    macs = in_elements * (out_channels // groups) * prod(kernel)
    return 2 * macs + (out_elements if bias else 0), macs


def _padding(module: _ConvNd) -> tuple[int, ...]:
    if isinstance(module.padding, str):
        if module.padding == "valid":
            return tuple(0 for _ in module.kernel_size)
        # "same": total padding d*(k-1), the larger half on the right
        return tuple(
            d * (k - 1) // 2 for d, k in zip(module.dilation, module.kernel_size, strict=False)
        )
    return tuple(module.padding)


_RF: dict[tuple[Any, ...], dict[str, int | float]] = {}


def conv_rf(module: _ConvNd) -> dict[str, int | float]:
    """Local (receptive field, stride, padding) in input positions, max over spatial dims.

    Memoised on the five attributes it reads (a network repeats few configurations); the
    caller gets a copy it may change.
    """
    key = (module.kernel_size, module.stride, module.padding, module.dilation, module.transposed)
    try:
        found = _RF.get(key)
    except TypeError:  # an attribute set to an unhashable value (a list): no memo
        return _conv_rf(module)
    if found is None:
        found = _conv_rf(module)
        if len(_RF) < 4096:
            _RF[key] = found
    return dict(found)


def _conv_rf(module: _ConvNd) -> dict[str, int | float]:
    kernels = [d * (k - 1) + 1 for d, k in zip(module.dilation, module.kernel_size, strict=False)]
    pads = _padding(module)
    if not module.transposed:
        return {
            "receptive_field": max(kernels),
            "effective_stride": max(module.stride),
            "effective_padding": max(pads),
        }
    # an output position gathers ceil(k/s) inputs; outputs advance 1/s input positions
    rf = max(ceil(k / s) for k, s in zip(kernels, module.stride, strict=False))
    stride = max(1 / s for s in module.stride)
    pad = max(floor((k - 1 - p) / s) for k, p, s in zip(kernels, pads, module.stride, strict=False))
    return {
        "receptive_field": rf,
        "effective_stride": int(stride) if stride == int(stride) else stride,
        "effective_padding": pad,
    }


@register_handler(nn.Conv1d, nn.Conv2d, nn.Conv3d)
def conv(ctx: CallContext) -> dict[str, Any]:
    module = ctx.module
    assert isinstance(module, _ConvNd)
    x, y = in_out(ctx)
    flops, macs = conv_cost(
        y.numel(), module.in_channels, module.groups, module.kernel_size, module.bias is not None
    )
    dmas = x.numel() + param_numel(module) + y.numel()
    return {"module_flops": flops, "macs": macs, "dmas": dmas, **conv_rf(module)}


@register_handler(nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)
def conv_transpose(ctx: CallContext) -> dict[str, Any]:
    module = ctx.module
    assert isinstance(module, _ConvNd)
    x, y = in_out(ctx)
    flops, macs = conv_transpose_cost(
        x.numel(),
        y.numel(),
        module.out_channels,
        module.groups,
        module.kernel_size,
        module.bias is not None,
    )
    dmas = x.numel() + param_numel(module) + y.numel()
    return {"module_flops": flops, "macs": macs, "dmas": dmas, **conv_rf(module)}
