"""Dropout (evaluation mode), Identity, Flatten and Unflatten: no arithmetic.

In evaluation mode dropout returns its input; Identity returns it; Flatten/Unflatten are views
(a non-contiguous input makes Flatten copy: that copy is not counted in DMAs, a documented
limitation). FLOPs, MACs and DMAs are an exact 0. Dropout/Identity/Flatten keep positions
(receptive field 1, stride 1, padding 0, as in torchscan); Unflatten has no spatial meaning.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from ..handlers import CallContext, register_handler
from ._common import pointwise_rf

# each dropout class by name: a handler claims a subclass only if it keeps the registered
# class's forward (handlers.lookup_handler), and _DropoutNd has none of its own
DROPOUTS = (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout)


@register_handler(*DROPOUTS, nn.FeatureAlphaDropout, nn.Identity, nn.Flatten)
def passthrough(ctx: CallContext) -> dict[str, Any]:
    return {"module_flops": 0, "macs": 0, "dmas": 0, **pointwise_rf()}


@register_handler(nn.Unflatten)
def unflatten(ctx: CallContext) -> dict[str, Any]:
    return {"module_flops": 0, "macs": 0, "dmas": 0}
