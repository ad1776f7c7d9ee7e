"""BatchNorm, InstanceNorm, GroupNorm, LayerNorm and RMSNorm (evaluation-mode forward).

Convention (every elementary add, multiply, divide or square root is one FLOP):
* statistics from the data (LayerNorm, GroupNorm, RMSNorm, instance norm, batch norm without
  running stats): mean and variance cost 4 per element (sum; subtract, square, accumulate) and
  2 per normalised group (two divisions); RMSNorm's mean of squares costs 2 per element and
  1 per group;
* normalising: subtract mean and multiply by the inverse std, 2 per element (RMSNorm: 1), plus
  2 per group (add eps, rsqrt);
* affine: 2 per element with weight and bias, 1 with weight only.
MACs count only the affine multiply-add (1 per element when both weight and bias exist).
DMAs = input + output + parameters + running statistics read.
"""

from __future__ import annotations

from math import prod
from typing import Any

from torch import nn
from torch.nn.modules.batchnorm import _NormBase

from ..handlers import CallContext, register_handler
from ._common import in_out, param_numel, pointwise_rf


def norm_cost(
    elements: int, groups: int, *, data_stats: bool, weight: bool, bias: bool, rms: bool = False
) -> tuple[int, int]:
    """(FLOPs, MACs) of normalising ``elements`` split into ``groups`` statistics groups."""
    flops = 0
    if data_stats:
        flops += (2 * elements + groups) if rms else (4 * elements + 2 * groups)
    flops += (1 if rms else 2) * elements + 2 * groups
    if weight:
        flops += elements * (2 if bias else 1)
    macs = elements if (weight and bias) else 0
    return flops, macs


@register_handler(
    nn.BatchNorm1d,
    nn.BatchNorm2d,
    nn.BatchNorm3d,
    nn.InstanceNorm1d,
    nn.InstanceNorm2d,
    nn.InstanceNorm3d,
)
def batch_instance_norm(ctx: CallContext) -> dict[str, Any]:
    module = ctx.module
    assert isinstance(module, _NormBase)
    x, y = in_out(ctx)
    running = module.track_running_stats and module.running_mean is not None
    instance = isinstance(module, nn.modules.instancenorm._InstanceNorm)
    channels = module.num_features
    batched = x.dim() > (module._get_no_batch_dim() if instance else 1)  # type: ignore[operator]
    batch = x.shape[0] if batched else 1
    if running:
        groups = channels
    elif instance:
        groups = batch * channels
    else:
        groups = channels
    flops, macs = norm_cost(
        x.numel(),
        groups,
        data_stats=not running,
        weight=module.weight is not None,
        bias=module.bias is not None,
    )
    dmas = x.numel() + y.numel() + param_numel(module) + (2 * channels if running else 0)
    result: dict[str, Any] = {"module_flops": flops, "macs": macs, "dmas": dmas}
    if running:
        result.update(pointwise_rf())
    return result


@register_handler(nn.GroupNorm)
def group_norm(ctx: CallContext) -> dict[str, Any]:
    module = ctx.module
    assert isinstance(module, nn.GroupNorm)
    x, y = in_out(ctx)
    groups = x.shape[0] * module.num_groups
    flops, macs = norm_cost(
        x.numel(), groups, data_stats=True, weight=module.affine, bias=module.affine
    )
    return {
        "module_flops": flops,
        "macs": macs,
        "dmas": x.numel() + y.numel() + param_numel(module),
    }


@register_handler(nn.LayerNorm)
def layer_norm(ctx: CallContext) -> dict[str, Any]:
    module = ctx.module
    assert isinstance(module, nn.LayerNorm)
    x, y = in_out(ctx)
    groups = x.numel() // prod(module.normalized_shape)
    flops, macs = norm_cost(
        x.numel(),
        groups,
        data_stats=True,
        weight=module.weight is not None,
        bias=getattr(module, "bias", None) is not None,
    )
    return {
        "module_flops": flops,
        "macs": macs,
        "dmas": x.numel() + y.numel() + param_numel(module),
    }


if hasattr(nn, "RMSNorm"):

    @register_handler(nn.RMSNorm)
    def rms_norm(ctx: CallContext) -> dict[str, Any]:
        module = ctx.module
        x, y = in_out(ctx)
        groups = x.numel() // prod(module.normalized_shape)  # type: ignore[arg-type]
        flops, macs = norm_cost(
            x.numel(),
            groups,
            data_stats=True,
            weight=module.weight is not None,
            bias=False,
            rms=True,
        )
        dmas = x.numel() + y.numel() + param_numel(module)
        return {"module_flops": flops, "macs": macs, "dmas": dmas}
