"""Upsample (and UpsamplingNearest2d / UpsamplingBilinear2d).

Convention, per output element: nearest 0 FLOPs (a copy); each linear interpolation
("lerp" a + t*(b - a)) is 3 FLOPs and 1 MAC: linear 1 lerp, bilinear 3, trilinear 7; bicubic
combines 4 points with 4 weights per dim (4 MACs, 7 FLOPs), 5 such combinations in 2-D
(35 FLOPs, 20 MACs). Interpolation weights/index computation is not counted. DMAs = input +
output. Receptive field: the points one output reads per dim (1 nearest, 2 linear, 4 cubic),
stride 1/scale input positions, padding 0.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from ..handlers import CallContext, register_handler
from ._common import in_out

UPSAMPLE_COST: dict[str, tuple[int, int, int]] = {
    # mode: (FLOPs per output element, MACs per output element, points read per dim)
    "nearest": (0, 0, 1),
    "nearest-exact": (0, 0, 1),
    "linear": (3, 1, 2),
    "bilinear": (9, 3, 2),
    "trilinear": (21, 7, 2),
    "bicubic": (35, 20, 4),
}


@register_handler(nn.Upsample)
def upsample(ctx: CallContext) -> dict[str, Any]:
    module = ctx.module
    assert isinstance(module, nn.Upsample)
    x, y = in_out(ctx)
    if module.mode not in UPSAMPLE_COST:
        return {"dmas": x.numel() + y.numel()}
    flops, macs, points = UPSAMPLE_COST[module.mode]
    dims = x.dim() - 2
    scale = max(y.shape[-d] / x.shape[-d] for d in range(1, dims + 1))
    stride = 1 / scale
    return {
        "module_flops": flops * y.numel(),
        "macs": macs * y.numel(),
        "dmas": x.numel() + y.numel(),
        "receptive_field": points,
        "effective_stride": int(stride) if stride == int(stride) else stride,
        "effective_padding": 0,
    }
