"""predict_memory: one way in to the three predictors, chosen by ``sharding``.

Why one entry: the capacity search, the pipeline's predict stage and a notebook user all ask
"how much memory does this step need, on one device or on one rank of N", and each had its
own branch over ``predict_peak_memory``, ``predict_sharded_peak_memory`` and
``predict_ddp_peak_memory``. The choice and its checks (a ``sharding`` needs a
``world_size``; worst-case routing is a one-device mode) live here once. The generic FSDP2
policy the stage applies to any configured model (every item of each ``nn.ModuleList``, then
the root) is here too, so a notebook gets the pipeline's figures without copying it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..report import PredictionReport
from .ddp import predict_ddp_peak_memory
from .peak import predict_peak_memory
from .sharded import predict_sharded_peak_memory

SHARDINGS = ("fsdp2", "ddp")


def resolve_sharding(sharding: str | None, world_size: int | None, caller: str) -> str | None:
    """The sharding a call means: ``None`` (one device), or ``"fsdp2"`` / ``"ddp"`` with a
    ``world_size`` (``"fsdp2"`` when only ``world_size`` is given); one-line errors else."""
    if sharding is not None and sharding not in SHARDINGS:
        raise ValueError(f"sharding must be None, 'fsdp2' or 'ddp', got {sharding!r}")
    if world_size is None:
        if sharding is not None:
            raise ValueError(
                f"{caller}: sharding={sharding!r} needs world_size (the ranks the step runs "
                "on); without it the search predicts one device"
            )
        return None
    if not isinstance(world_size, int) or isinstance(world_size, bool) or world_size < 1:
        raise ValueError(f"world_size must be an int >= 1, got {world_size!r}")
    return sharding or "fsdp2"


def predict_memory(
    step: Callable[..., Any],
    *,
    sharding: str | None = None,
    world_size: int | None = None,
    rank: int = 0,
    device: str = "cuda",
    capacity_bytes: int | None = None,
    name: str | None = None,
    routing: str = "exact",
) -> PredictionReport:
    """Predict the memory of one training or inference step, on one device or one rank.

    ``sharding=None`` (and no ``world_size``): ``step()`` as :func:`predict_peak_memory`
    takes it. ``"fsdp2"`` (the default when ``world_size`` is given): ``step(mesh)`` on a
    fake world of ``world_size`` ranks, :func:`predict_sharded_peak_memory`. ``"ddp"``:
    ``step(wrap)``, :func:`predict_ddp_peak_memory`. The report is the chosen predictor's:
    first step, steady state, resident bytes and ``fits`` alike in all three.
    """
    chosen = resolve_sharding(sharding, world_size, "predict_memory")
    if chosen is None:
        if rank != 0:
            raise ValueError(f"rank={rank!r} needs world_size (one device has rank 0 only)")
        return predict_peak_memory(
            step, device=device, capacity_bytes=capacity_bytes, name=name, routing=routing
        )
    if routing != "exact":
        raise ValueError(
            f"routing={routing!r} is a one-device mode; with sharding={chosen!r} only "
            "routing='exact' is predicted"
        )
    assert world_size is not None
    predictor = predict_ddp_peak_memory if chosen == "ddp" else predict_sharded_peak_memory
    return predictor(
        step,
        world_size=world_size,
        rank=rank,
        device=device,
        capacity_bytes=capacity_bytes,
        name=name,
    )


def shard_module_lists(model: Any, mesh: Any) -> Any:
    """FSDP2 as a generic policy: ``fully_shard`` each item of every ``nn.ModuleList`` that
    holds parameters (a transformer's blocks), then the root; a model built on ``meta`` is
    materialised afterwards as fake CPU tensors (``to_empty``). Returns the model."""
    import torch
    from torch.distributed.fsdp import fully_shard

    for module in list(model.modules()):
        if isinstance(module, torch.nn.ModuleList):
            for item in module:
                if any(True for _ in item.parameters()):
                    fully_shard(item, mesh=mesh)
    fully_shard(model, mesh=mesh)
    model.to_empty(device="cpu")
    return model


def meta_to_cpu(tree: Any) -> Any:
    """Tensors on ``meta`` in ``tree`` as CPU tensors of the same shape and dtype (zeros;
    under fake tensors only the shapes matter), for inputs built beside a ``meta`` model."""
    import torch
    from torch.utils._pytree import tree_map_only

    return tree_map_only(
        torch.Tensor,
        lambda t: torch.zeros(t.shape, dtype=t.dtype) if t.device.type == "meta" else t,
        tree,
    )


__all__ = ["SHARDINGS", "meta_to_cpu", "predict_memory", "resolve_sharding", "shard_module_lists"]
