"""FSDP2 training steps of the small decoder, for the sharded-prediction tests.

``fsdp_step(...)`` returns a ``step(mesh)`` callable: build the decoder on ``meta``, apply
``fully_shard`` to every block and the root, materialise with ``to_empty`` (no full-size
copy ever exists), AdamW, one forward/backward/step. ``run_step`` runs the same body on a
model and optimizer already built, so torch's ``FSDPMemTracker`` can wrap exactly the step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from predict_models import Decoder, DecoderShape

# about 1.1 M parameters: a fast fake run on a loaded 2-core machine
TINY = DecoderShape(vocab=1024, dim=128, layers=2, heads=4, kv_heads=2, hidden=352)


def build_sharded(
    mesh: Any,
    shape: DecoderShape = TINY,
    *,
    reshard_after_forward: bool = True,
    bf16: bool = False,
    device: str = "cpu",
) -> torch.nn.Module:
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    options: dict[str, Any] = {"mesh": mesh, "reshard_after_forward": reshard_after_forward}
    if bf16:
        options["mp_policy"] = MixedPrecisionPolicy(
            param_dtype=torch.bfloat16, reduce_dtype=torch.float32
        )
    with torch.device("meta"):
        model = Decoder(shape)
    for block in model.blocks:
        fully_shard(block, **options)
    fully_shard(model, **options)
    model.to_empty(device=device)
    return model


def run_step(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    batch: int,
    tokens: int,
    vocab: int,
    device: str = "cpu",
) -> None:
    ids = torch.randint(0, vocab, (batch, tokens), device=device)
    model(ids).float().pow(2).mean().backward()
    optimizer.step()
    optimizer.zero_grad()


def fsdp_step(
    shape: DecoderShape = TINY,
    *,
    batch: int = 2,
    tokens: int = 64,
    reshard_after_forward: bool = True,
    bf16: bool = False,
    steps: int = 1,
) -> Callable[[Any], None]:
    """``steps``: training steps on the one model (2: the real steady state's reference)."""

    def step(mesh: Any) -> None:
        model = build_sharded(mesh, shape, reshard_after_forward=reshard_after_forward, bf16=bf16)
        optimizer = torch.optim.AdamW(model.parameters())
        for _ in range(steps):
            run_step(model, optimizer, batch, tokens, shape.vocab)

    return step


def padded_shard_bytes(shape: DecoderShape, world: int, itemsize: int = 4) -> int:
    """Closed form of one rank's parameter bytes: FSDP2 shards every parameter on dim 0,
    padded to ceil(rows / world) rows, of which each rank holds one."""
    with torch.device("meta"):
        model = Decoder(shape)
    total = 0
    for param in model.parameters():
        rows = param.shape[0]
        rest = param.numel() // rows
        total += -(-rows // world) * rest * itemsize
    return total
