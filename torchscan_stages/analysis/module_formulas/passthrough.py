"""Dropout (evaluation mode), Identity, Flatten and Unflatten: no arithmetic.

In evaluation mode dropout returns its input; Identity returns it; Flatten/Unflatten are views
(a non-contiguous input makes Flatten copy: that copy is not counted in DMAs, a documented
limitation). FLOPs, MACs and DMAs are an exact 0. Dropout/Identity/Flatten keep positions
(receptive field 1, stride 1, padding 0, as in torchscan); Unflatten has no spatial meaning.
"""

from __future__ import annotations

from typing import Any

from torch import nn
from torch.nn.modules.dropout import _DropoutNd

from ..handlers import CallContext, register_handler
from ._common import pointwise_rf


@register_handler(_DropoutNd, nn.Identity, nn.Flatten)
def passthrough(ctx: CallContext) -> dict[str, Any]:
    return {"module_flops": 0, "macs": 0, "dmas": 0, **pointwise_rf()}


@register_handler(nn.Unflatten)
def unflatten(ctx: CallContext) -> dict[str, Any]:
    return {"module_flops": 0, "macs": 0, "dmas": 0}
