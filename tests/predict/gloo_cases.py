"""The steps the real gloo worlds measure and the tests predict: one definition for both.

Small on purpose: a case's cost in a rank is milliseconds against the launch's seconds, and
the fake-world prediction in the test process scales with the model. ``GLOO_SHAPE``'s FFN
width (99 rows) is uneven at 2 and at 4 ranks, so FSDP2's padded shards are exercised.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from ddp_models import ddp_step
from predict_models import DecoderShape
from sharded_models import fsdp_step
from torch import nn

# about 0.1 M parameters: vocab 256, d 64, 2 blocks, FFN 99 (ceil(99 / 2) = 50 and
# ceil(99 / 4) = 25 rows per shard: one padding row at 2 ranks, one at 4)
GLOO_SHAPE = DecoderShape(vocab=256, dim=64, layers=2, heads=4, kv_heads=2, hidden=99)
BATCH, TOKENS = 2, 32
# the TP MLP: column-wise width -> hidden, row-wise back, on (batch, tokens, width) inputs;
# name -> (width, hidden, batch, tokens). "tp": the weights outweigh the activations, so the
# peak is the optimizer step's; "tp_activations": the activations outweigh the weights
TP_CASES: dict[str, tuple[int, int, int, int]] = {
    "tp": (256, 1024, 4, 64),
    "tp_activations": (64, 256, 4, 32),
}
FSDP_CASES: dict[str, dict[str, Any]] = {
    "fsdp": {},
    "fsdp_no_reshard": {"reshard_after_forward": False},
}
DDP_CASES: dict[str, bool] = {"ddp": False, "ddp_buffers": True}  # name -> BatchNorm buffers
# the steady state's real reference: the same steps run twice on one model, measured whole
# (the peak of two steps is the second's); name -> (family, case, set_to_none)
STEADY_CASES: dict[str, tuple[str, str, bool]] = {
    "fsdp_steady": ("fsdp", "fsdp", True),
    "fsdp_no_reshard_steady": ("fsdp", "fsdp_no_reshard", True),
    "ddp_steady": ("ddp", "ddp", True),
    "ddp_keep_steady": ("ddp", "ddp", False),  # zero_grad(set_to_none=False)
}
# the FSDP2 max_batch_size check: two real steps at each of these batches (the test aims its
# capacity between the last two, so the search must answer the second-to-last)
CAPACITY_BATCHES = (3, 4)
DDP_CAPACITY_BATCHES = (5, 6)  # the same for DDP (its steady state is affine from batch 4)


def fsdp_case(name: str, steps: int = 1, batch: int = BATCH) -> Callable[[Any], None]:
    """``step(mesh)`` of the FSDP2 case ``name``, ``steps`` steps on one model."""
    return fsdp_step(GLOO_SHAPE, batch=batch, tokens=TOKENS, steps=steps, **FSDP_CASES[name])


def ddp_case(
    name: str, steps: int = 1, set_to_none: bool = True, batch: int = BATCH
) -> Callable[[Any], None]:
    """``step(wrap)`` of the DDP case ``name``, ``steps`` steps on one model."""
    return ddp_step(
        batch,
        TOKENS,
        buffers=DDP_CASES[name],
        shape=GLOO_SHAPE,
        steps=steps,
        set_to_none=set_to_none,
    )


def steady_case(name: str, steps: int) -> Callable[[Any], None]:
    """The steady-state case ``name`` at ``steps`` steps: ``step(mesh)`` or ``step(wrap)``."""
    family, case, set_to_none = STEADY_CASES[name]
    if family == "fsdp":
        return fsdp_case(case, steps)
    return ddp_case(case, steps, set_to_none)


def tp_case(name: str) -> Callable[[Any], None]:
    """``step(mesh)`` of the TP case ``name``: ``parallelize_module``, column- then
    row-wise, AdamW."""
    width, hidden, batch, tokens = TP_CASES[name]

    def step(mesh: Any) -> None:
        from torch.distributed.tensor.parallel import (
            ColwiseParallel,
            RowwiseParallel,
            parallelize_module,
        )

        torch.manual_seed(0)
        mlp = nn.Sequential(
            nn.Linear(width, hidden, bias=False), nn.ReLU(), nn.Linear(hidden, width, bias=False)
        )
        model = parallelize_module(mlp, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
        optimizer = torch.optim.AdamW(model.parameters(), foreach=False)
        model(torch.randn(batch, tokens, width)).pow(2).mean().backward()
        optimizer.step()
        optimizer.zero_grad()

    return step
