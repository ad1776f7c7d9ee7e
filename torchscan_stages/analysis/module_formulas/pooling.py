"""Max, average, adaptive and power-average (LP) pooling.

Convention: max pooling = prod(kernel) - 1 comparisons per output element; average pooling =
prod(kernel) - 1 adds and 1 divide per output element; windows clipped by padding or
ceil_mode are counted at full kernel size (an upper bound of the work actually done).
Adaptive pooling sums its exact, uneven window sizes (start = floor(i*in/out), end =
ceil((i+1)*in/out) per dim). LP pooling: 1 power per input element, prod(kernel) per output
window (sum + scale), 2 per output (sign/relu product, root). MACs are 0. DMAs = input +
output elements. Receptive field: kernel (dilated for max pooling), stride and padding, max
over spatial dims; adaptive pooling uses its largest window and stride in/out.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import ceil, floor, prod
from typing import Any

from torch import nn
from torch.nn.modules.pooling import (
    _AdaptiveAvgPoolNd,
    _AdaptiveMaxPoolNd,
    _AvgPoolNd,
    _LPPoolNd,
    _MaxPoolNd,
)

from ..handlers import CallContext, register_handler
from ._common import in_out


def _tuple(value: Any, dims: int) -> tuple[int, ...]:
    return tuple(value) if isinstance(value, (tuple, list)) else (int(value),) * dims


def adaptive_windows(in_size: int, out_size: int) -> list[int]:
    """Window sizes of adaptive pooling along one dim (PyTorch's start/end rule)."""
    return [
        ceil((i + 1) * in_size / out_size) - floor(i * in_size / out_size) for i in range(out_size)
    ]


def adaptive_window_sum(in_spatial: Sequence[int], out_spatial: Sequence[int]) -> int:
    """Sum over output positions of the window volume; separable, so a product of sums."""
    return prod(sum(adaptive_windows(i, o)) for i, o in zip(in_spatial, out_spatial, strict=False))


def _rf(kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int]) -> dict[str, int]:
    return {
        "receptive_field": max(kernel),
        "effective_stride": max(stride),
        "effective_padding": max(padding),
    }


def _dims(module: nn.Module) -> int:
    name = type(module).__name__
    for dims in (1, 2, 3):
        if f"{dims}d" in name:
            return dims
    return 2


def _window(module: nn.Module, dims: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(kernel, stride) per spatial dim; PyTorch pools default the stride to the kernel."""
    kernel_size: Any = module.kernel_size
    stride: Any = module.stride if module.stride is not None else kernel_size
    return _tuple(kernel_size, dims), _tuple(stride, dims)


@register_handler(nn.MaxPool1d, nn.MaxPool2d, nn.MaxPool3d)
def max_pool(ctx: CallContext) -> dict[str, Any]:
    module = ctx.module
    assert isinstance(module, _MaxPoolNd)
    x, y = in_out(ctx)
    dims = _dims(module)
    kernel, stride = _window(module, dims)
    dilation = _tuple(module.dilation, dims)
    outputs = ctx.output if isinstance(ctx.output, tuple) else (y,)  # return_indices
    dmas = x.numel() + sum(t.numel() for t in outputs)
    return {
        "module_flops": outputs[0].numel() * (prod(kernel) - 1),
        "macs": 0,
        "dmas": dmas,
        **_rf(
            [d * (k - 1) + 1 for d, k in zip(dilation, kernel, strict=False)],
            stride,
            _tuple(module.padding, dims),
        ),
    }


@register_handler(nn.AvgPool1d, nn.AvgPool2d, nn.AvgPool3d)
def avg_pool(ctx: CallContext) -> dict[str, Any]:
    module = ctx.module
    assert isinstance(module, _AvgPoolNd)
    x, y = in_out(ctx)
    dims = _dims(module)
    kernel, stride = _window(module, dims)
    return {
        "module_flops": y.numel() * prod(kernel),
        "macs": 0,
        "dmas": x.numel() + y.numel(),
        **_rf(kernel, stride, _tuple(module.padding, dims)),
    }


def _adaptive(ctx: CallContext, is_max: bool) -> dict[str, Any]:
    x, y = in_out(ctx)
    dims = _dims(ctx.module)
    in_spatial = list(x.shape[-dims:])
    out_spatial = list(y.shape[-dims:])
    planes = x.numel() // prod(in_spatial)  # N x C
    window_sum = adaptive_window_sum(in_spatial, out_spatial)
    out_elements = planes * prod(out_spatial)
    flops = planes * window_sum - (out_elements if is_max else 0)
    strides = [i / o for i, o in zip(in_spatial, out_spatial, strict=False)]
    stride = max(strides)
    outputs = ctx.output if isinstance(ctx.output, tuple) else (y,)
    return {
        "module_flops": flops,
        "macs": 0,
        "dmas": x.numel() + sum(t.numel() for t in outputs),
        "receptive_field": max(
            max(adaptive_windows(i, o)) for i, o in zip(in_spatial, out_spatial, strict=False)
        ),
        "effective_stride": int(stride) if stride == int(stride) else stride,
        "effective_padding": 0,
    }


@register_handler(nn.AdaptiveMaxPool1d, nn.AdaptiveMaxPool2d, nn.AdaptiveMaxPool3d)
def adaptive_max_pool(ctx: CallContext) -> dict[str, Any]:
    assert isinstance(ctx.module, _AdaptiveMaxPoolNd)
    return _adaptive(ctx, is_max=True)


@register_handler(nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool2d, nn.AdaptiveAvgPool3d)
def adaptive_avg_pool(ctx: CallContext) -> dict[str, Any]:
    assert isinstance(ctx.module, _AdaptiveAvgPoolNd)
    return _adaptive(ctx, is_max=False)


_LP = [nn.LPPool1d, nn.LPPool2d] + ([nn.LPPool3d] if hasattr(nn, "LPPool3d") else [])


@register_handler(*_LP)
def lp_pool(ctx: CallContext) -> dict[str, Any]:
    module = ctx.module
    assert isinstance(module, _LPPoolNd)
    x, y = in_out(ctx)
    dims = _dims(module)
    kernel, stride = _window(module, dims)
    return {
        "module_flops": x.numel() + y.numel() * (prod(kernel) + 2),
        "macs": 0,
        "dmas": x.numel() + y.numel(),
        **_rf(kernel, stride, (0,) * dims),
    }
