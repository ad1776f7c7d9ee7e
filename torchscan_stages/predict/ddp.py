"""Per-rank peak memory of a ``DistributedDataParallel`` training step, without a process group.

Why not run DDP itself on fake tensors: torch 2.13's C++ reducer reads tensor data while it
is built, so ``DistributedDataParallel`` cannot wrap a fake module. What DDP adds to one
rank's memory is, however, small and fixed by its options: at construction it broadcasts the
parameters and buffers from rank 0 in flat chunks of at most 250 MiB (``flatten_dense_tensors``
copies, at most two in flight; a chunk of one tensor is a view), then its reducer allocates one
flat buffer per gradient bucket, kept for the module's life. With
``gradient_as_bucket_view=False`` (the default) the buckets are copies: each gradient is
copied into its bucket, all-reduced there and copied back, in place, so nothing else is
allocated in the step (the collective's own scratch lives in gloo or NCCL, outside torch's
allocator). Each forward broadcasts the buffers again (``broadcast_buffers=True``, the
default): the same flat chunks, before the module runs. Before the first backward the
reducer has not rebuilt its buckets, so with ``find_unused_parameters=False`` one bucket
holds every parameter of a dtype and device.

So the step takes ``wrap`` where a real run passes ``DistributedDataParallel`` itself:
``model = wrap(model, bucket_cap_mb=...)``. In the prediction ``wrap`` returns the module
unwrapped and, at that moment of the fake run, allocates what DDP would: the broadcast chunks
(freed at once) and the gradient buckets (alive until the step returns), using torch's own
bucket assignment (``dist._compute_bucket_assignment_by_size``), and hooks the module's
forward for the buffer broadcasts (the hook is removed afterwards). The tracker sees all of
it in order with everything else, so the peak is the step's, not a sum of separate peaks.

Options that change memory in ways not modelled here (``gradient_as_bucket_view=True``,
``static_graph``, ``find_unused_parameters``, ``mixed_precision``, anything else) make the
figures ``partial`` with an ``unmodelled_parallelism`` warning that names the option.
Communication hooks, ``no_sync`` and other DDP methods are absent on the unwrapped module; a
step that calls them fails and is not predicted.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from ..report import Diagnostic, PredictionReport
from .allocator import allocator_model
from .assemble import check_capacity, check_name, per_rank_report
from .ownership import CATEGORIES
from .parallelism import UNMODELLED
from .peak import _run
from .sharded import ShardedOwnership, ShardedTracker

DDP_CATEGORIES = (*CATEGORIES, "gradient_buckets")
BROADCAST_BUCKET_BYTES = 250 * 1024 * 1024  # DistributedDataParallel.broadcast_bucket_size
# options of DistributedDataParallel with no effect on a rank's allocated memory here
# (bucket_cap_mb: the first step's buckets ignore it, one bucket per dtype and device)
NEUTRAL_OPTIONS = frozenset(
    {"device_ids", "output_device", "dim", "process_group", "init_sync", "bucket_cap_mb"}
)
# options whose default is modelled; any other value changes memory in an unmodelled way
DEFAULTS_MODELLED = {
    "gradient_as_bucket_view": False,
    "static_graph": False,
    "find_unused_parameters": False,
    "mixed_precision": None,
    "bucket_cap_mb_list": None,
    "broadcast_buffers": True,
}


@dataclass(slots=True)
class _Wrapped:
    """What the fake ``wrap`` did: the buckets it made and the options it could not model."""

    buckets: list[torch.Tensor] = field(default_factory=list)
    bucket_bytes: list[int] = field(default_factory=list)
    calls: int = 0
    unmodelled: list[str] = field(default_factory=list)
    hooks: list[Any] = field(default_factory=list)  # per-forward buffer broadcasts


def _ownership() -> ShardedOwnership:
    """The running prediction's ownership (the tracker is the innermost dispatch mode)."""
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    for mode in reversed(_get_current_dispatch_mode_stack()):
        if isinstance(mode, ShardedTracker):
            assert isinstance(mode.ownership, ShardedOwnership)
            return mode.ownership
    raise RuntimeError("predict_ddp_peak_memory: wrap() was called outside the prediction")


def _bucket_limits(options: dict[str, Any]) -> list[int]:
    """The reducer's initial bucket limits, as DistributedDataParallel computes them."""
    from torch.nn.parallel.distributed import _BucketCapacityConfig

    config = _BucketCapacityConfig.create(options.get("bucket_cap_mb"), None, False)
    limits, _ = config.compute_bucket_size_limits(static_graph=False, find_unused_parameters=False)
    return limits


def _make_wrap(done: _Wrapped, world_size: int) -> Callable[..., torch.nn.Module]:
    import torch.distributed as dist

    def wrap(module: torch.nn.Module, *args: Any, **options: Any) -> torch.nn.Module:
        """Stand-in for ``DistributedDataParallel(module, **options)`` in the fake run."""
        if not isinstance(module, torch.nn.Module):
            raise TypeError(f"wrap() takes the module to replicate, got {type(module).__name__}")
        done.calls += 1
        if args:
            done.unmodelled.append(f"{len(args)} positional option(s) after the module")
        for name, value in options.items():
            if name in DEFAULTS_MODELLED:
                if value != DEFAULTS_MODELLED[name]:
                    done.unmodelled.append(f"{name}={value!r}")
            elif name not in NEUTRAL_OPTIONS:
                done.unmodelled.append(f"{name}={value!r}")
        ignored = set(getattr(module, "_ddp_params_and_buffers_to_ignore", ()))
        params = [p for n, p in module.named_parameters() if n not in ignored]
        states = [p.detach() for p in params]
        if options.get("broadcast_buffers", True):
            states += [b.detach() for n, b in module.named_buffers() if n not in ignored]
        if options.get("init_sync", True) and states:
            _broadcast_chunks(states, dist)
        buffers = [b for n, b in module.named_buffers() if n not in ignored]
        if options.get("broadcast_buffers", True) and buffers:
            # every forward broadcasts the buffers from rank 0 (DDP._sync_buffers): the same
            # flat chunks, made and freed before the module runs
            def sync_buffers(*_: Any) -> None:
                with torch.no_grad():
                    _broadcast_chunks([b.detach() for b in buffers], dist)

            done.hooks.append(module.register_forward_pre_hook(sync_buffers))
        trained: list[torch.Tensor] = [p for p in params if p.requires_grad]
        if not trained:
            return module
        indices, _ = dist._compute_bucket_assignment_by_size(
            trained, _bucket_limits(options), [p.is_sparse for p in trained]
        )
        ownership = _ownership()
        for bucket in indices:
            first = trained[bucket[0]]
            numel = sum(trained[i].numel() for i in bucket)
            flat = torch.empty(numel, dtype=first.dtype, device=first.device)
            ownership.tag_buffer(flat, "gradient_buckets")
            done.buckets.append(flat)
            done.bucket_bytes.append(numel * first.element_size())
        return module

    return wrap


def _broadcast_chunks(states: list[torch.Tensor], dist: Any) -> None:
    """The construction-time broadcast's flat copies: chunks of at most 250 MiB per dtype and
    device, at most two alive at once (``c10d::broadcast_coalesced``)."""
    chunks, _ = dist._compute_bucket_assignment_by_size(states, [BROADCAST_BUCKET_BYTES])
    in_flight: deque[torch.Tensor | None] = deque()
    for chunk in chunks:
        if len(in_flight) >= 2:
            in_flight.popleft()
        if len(chunk) == 1:
            in_flight.append(None)  # a one-tensor chunk is broadcast through a view
            continue
        first = states[chunk[0]]
        numel = sum(states[i].numel() for i in chunk)
        in_flight.append(torch.empty(numel, dtype=first.dtype, device=first.device))
    in_flight.clear()


def predict_ddp_peak_memory(
    step: Callable[[Callable[..., torch.nn.Module]], Any],
    *,
    world_size: int,
    rank: int = 0,
    device: str = "cuda",
    capacity_bytes: int | None = None,
    name: str | None = None,
) -> PredictionReport:
    """Predict one rank's peak memory of a DDP training step on ``world_size`` ranks,
    without a process group or accelerator.

    ``step(wrap)`` builds its model, calls ``model = wrap(model, **ddp_options)`` where a
    real run calls ``DistributedDataParallel(model, **ddp_options)``, builds its optimizer
    and inputs and runs one step; it is called once inside ``FakeTensorMode``. Every rank
    holds the same bytes (DDP replicates), so ``rank`` only labels the report.
    ``by_category["gradient_buckets"]`` is the reducer's flat bucket buffers at the peak.
    """
    if not callable(step):
        raise TypeError(f"step must be a callable taking wrap, got {type(step).__name__}")
    for value, label in ((world_size, "world_size"), (rank, "rank")):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{label} must be a non-negative int, got {value!r}")
    if world_size < 1 or rank >= world_size:
        raise ValueError(f"need 0 <= rank < world_size, got rank {rank}, world {world_size}")
    check_capacity(capacity_bytes)
    check_name(name)
    allocator = allocator_model(str(device))
    done = _Wrapped()
    wrap = _make_wrap(done, world_size)
    try:
        tracker, snapshot, diagnostics = _run(
            lambda: step(wrap),
            allocator,
            tracker_type=ShardedTracker,
            ownership_type=ShardedOwnership,
        )
    finally:
        done.buckets.clear()
        for hook in done.hooks:
            hook.remove()  # the user's module is left without the stand-in's hook
    return per_rank_report(
        tracker,
        snapshot,
        diagnostics,
        allocator,
        scheme=("ddp", DDP_CATEGORIES, _ddp_diagnostics(done, world_size, rank, allocator)),
        world=(world_size, rank),
        device=str(device),
        capacity_bytes=capacity_bytes,
        name=name,
    )


def _ddp_diagnostics(
    done: _Wrapped, world_size: int, rank: int, allocator: Any
) -> list[Diagnostic]:
    rounded = sum(allocator.rounded(b) for b in done.bucket_bytes)
    found = [
        Diagnostic(
            code="per_rank_prediction",
            severity="info",
            metric="peak",
            message=f"rank {rank} of {world_size} DDP replicas: the unwrapped step plus DDP's "
            f"construction broadcast chunks and {len(done.bucket_bytes)} gradient bucket(s) "
            f"of {rounded:,} bytes (initial bucketing; rebuilt after the first backward)",
        )
    ]
    if done.calls == 0:
        found.append(
            Diagnostic(
                code=UNMODELLED,
                metric="peak",
                message="the step never called wrap(): no module was replicated, so no "
                "gradient bucket is counted; pass the model through wrap() where the real "
                "run calls DistributedDataParallel",
            )
        )
    for option in done.unmodelled:
        found.append(
            Diagnostic(
                code=UNMODELLED,
                metric="peak",
                message=f"DistributedDataParallel option {option}: its memory (bucket views, "
                "static-graph or unused-parameter bookkeeping, mixed-precision copies, "
                "per-forward buffer broadcasts) is not modelled, so the figures are a lower "
                "bound of the defaults' case",
            )
        )
    return found


__all__ = ["DDP_CATEGORIES", "predict_ddp_peak_memory"]
