"""DDP training steps of the small decoder, for the DDP prediction tests.

``ddp_step(...)`` returns a ``step(wrap)`` callable: build the decoder, ``wrap`` it (the
prediction's stand-in, or ``DistributedDataParallel`` itself in a real run), AdamW, one
forward/backward/step. The same body runs in the prediction and in the gloo ranks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from predict_models import Decoder, DecoderShape
from sharded_models import TINY
from torch import nn


class NormedDecoder(nn.Module):
    """The decoder with a BatchNorm over its logits' features: buffers DDP broadcasts."""

    def __init__(self, shape: DecoderShape = TINY) -> None:
        super().__init__()
        self.decoder = Decoder(shape)
        self.norm = nn.BatchNorm1d(shape.vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.norm(self.decoder(ids).transpose(1, 2))


def ddp_step(
    batch: int = 2,
    tokens: int = 64,
    *,
    buffers: bool = False,
    shape: DecoderShape = TINY,
    steps: int = 1,
    set_to_none: bool = True,
    **options: Any,
) -> Callable[[Any], None]:
    """``steps``: training steps on the one model (2: the real steady state's reference);
    ``set_to_none=False`` keeps the gradients between steps."""

    def step(wrap: Any) -> None:
        torch.manual_seed(0)
        model = wrap(NormedDecoder(shape) if buffers else Decoder(shape), **options)
        optimizer = torch.optim.AdamW(model.parameters())
        for _ in range(steps):
            ids = torch.randint(0, shape.vocab, (batch, tokens))
            model(ids).float().pow(2).mean().backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=set_to_none)

    return step
