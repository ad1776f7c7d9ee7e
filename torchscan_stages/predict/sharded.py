"""Per-rank peak memory of an FSDP2 (``fully_shard``) training step, on a fake world.

Why a fake process group rather than dividing the single-device figures by the world size:
FSDP2's memory is not a closed form of the model's. Each parameter is padded to a multiple
of the world size, groups are all-gathered and freed at hook-defined moments
(``reshard_after_forward``, prefetching), reduce-scatter inputs live alongside the
unsharded gradients, and mixed precision keeps copies in two dtypes. Running the real FSDP2
code on fake tensors with torch's fake backend (``FakeStore``, backend ``"fake"``: every
collective returns at once, no data moves) sees each of those storages as rank ``rank`` of
``world_size`` would hold it. The process group is initialised inside the prediction and
destroyed in ``finally``; a process group that already exists is refused, never replaced.

What is tracked beyond ``PeakTracker``: DTensor operators are left to DTensor to desugar
(the tracker returns ``NotImplemented`` for them) so only the local shard operators are
counted, as in torch's ``FSDPMemTracker``; ``UntypedStorage.resize_`` (FSDP2 frees and
re-allocates unsharded parameters through it) is followed while the prediction runs and
restored afterwards; all-gather outputs and reduce-scatter inputs are their own categories.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import torch

from ..provenance import build_provenance
from ..report import Diagnostic, MetricResult, PredictionReport
from .allocator import allocator_model
from .ownership import Owned, Ownership, _key
from .parallelism import UNMODELLED, unmodelled
from .peak import METHOD, PHASES, _diagnostics_of, _fits, _result, _run
from .tracker import PeakTracker

SHARDED_CATEGORIES = (
    "parameters",
    "unsharded_parameters",
    "buffers",
    "gradients",
    "unsharded_gradients",
    "optimizer_state",
    "activations",
    "temporaries",
    "all_gather_buffers",
    "reduce_scatter_buffers",
    "other",
)
COLLECTIVES_OWNER = "(collectives)"
# what FSDP2 on a one-dimensional mesh runs; anything else is a parallelism not modelled
FSDP_COLLECTIVES = frozenset(
    {
        "c10d._allgather_base_.default",
        "c10d._reduce_scatter_base_.default",
        "c10d.allreduce_.default",  # gradient-norm clipping, loss averaging
        "c10d.broadcast_.default",
        "_c10d_functional.all_reduce.default",
        "_c10d_functional.wait_tensor.default",
    }
)


class ShardedOwnership(Ownership):
    """Ownership that knows FSDP2's sharded and unsharded parameters and its comm buffers."""

    def __init__(self) -> None:
        super().__init__()
        # storage key -> (category, weak reference to the storage) for collective buffers
        self.buffers: dict[int, tuple[str, weakref.ref[Any]]] = {}
        # DTensor parameters seen (id -> name) and those FSDP2 manages, over the whole run:
        # a snapshot before the root's first forward does not know its FSDP state yet
        self.dtensor_params: dict[int, str] = {}
        self.managed: set[int] = set()
        self.offloaded = 0  # FSDP2 parameters with CPUOffloadPolicy: host shards, not modelled

    def tag_buffer(self, tensor: torch.Tensor, category: str) -> None:
        key = _key(tensor)
        if key is not None:
            self.buffers[key] = (category, weakref.ref(tensor.untyped_storage()))

    def _fsdp_params(self) -> Iterator[Any]:
        """FSDP2's ``FSDPParam`` objects of every ``fully_shard``-ed module seen."""
        from torch.distributed.fsdp import FSDPModule

        for module in list(self._modules):
            if not isinstance(module, FSDPModule):
                continue
            state = module._get_fsdp_state()
            for group in getattr(state, "_fsdp_param_groups", None) or [state._fsdp_param_group]:
                yield from getattr(group, "fsdp_params", ())

    def snapshot(
        self,
        *,
        host_step_counters: bool,
        grads: dict[int, Any] | None = None,
        owned: Owned | None = None,
    ) -> Owned:
        """FSDP2's shards first (they sit in the optimizer, not always in the module), then
        collective buffers, then what :class:`Ownership` classifies."""
        owned = Owned() if owned is None else owned
        managed = self.managed
        for fsdp_param in self._fsdp_params():
            module = fsdp_param._module_info.module
            sharded = fsdp_param.sharded_param
            if getattr(fsdp_param, "offload_to_cpu", False) and id(sharded) not in managed:
                self.offloaded += 1
            managed.add(id(sharded))
            self._put(owned, sharded, "parameters", module)
            self._put(owned, sharded.grad, "gradients", module)
            unsharded = getattr(fsdp_param, "_unsharded_param", None)
            if unsharded is not None:
                managed.add(id(unsharded))
                self._put(owned, unsharded, "unsharded_parameters", module)
                self._put(owned, unsharded.grad, "unsharded_gradients", module)
        for key, (category, ref) in list(self.buffers.items()):
            if ref() is None:
                del self.buffers[key]
            elif key not in owned.category:
                owned.category[key] = category
                owned.owner[key] = COLLECTIVES_OWNER
        self._note_dtensors()
        return super().snapshot(host_step_counters=host_step_counters, grads=grads, owned=owned)

    def _note_dtensors(self) -> None:
        from torch.distributed.tensor import DTensor

        for module in list(self._modules):
            for name, param in module._parameters.items():
                if isinstance(param, DTensor):
                    self.dtensor_params[id(param)] = f"{type(module).__name__}.{name}"

    def unmanaged_dtensors(self) -> list[str]:
        """DTensor parameters FSDP2 does not manage: tensor parallel or hand-placed shards."""
        self._note_dtensors()
        return sorted(
            {name for key, name in self.dtensor_params.items() if key not in self.managed}
        )

    @staticmethod
    def _put(owned: Owned, tensor: Any, category: str, module: torch.nn.Module) -> None:
        key = _key(tensor)
        if key is not None and key not in owned.category:
            owned.category[key] = category
            owned.owner[key] = module


class ShardedTracker(PeakTracker):
    """``PeakTracker`` for one rank of an FSDP2 step: local shards, resizes, comm buffers."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._entry_fake: Any = None
        self._propagating = 0
        self._restore: list[tuple[Any, str, Any]] = []

    def __enter__(self) -> ShardedTracker:
        from torch._guards import active_fake_mode
        from torch.distributed.tensor._sharding_prop import ShardingPropagator

        self._entry_fake = active_fake_mode()
        tracker = self
        propagate = ShardingPropagator._propagate_tensor_meta_non_cached
        resize = torch.UntypedStorage.resize_

        def resize_(storage: torch.UntypedStorage, size: int) -> Any:
            out = resize(storage, size)
            tracker.resized(storage)
            return out

        def propagate_meta(propagator: Any, *args: Any, **kwargs: Any) -> Any:
            # DTensor infers output shapes by running the op on global-shaped fakes in the
            # active fake mode (ours): no rank allocates them, and torch caches the result
            # after the first call of each signature, so counting them would make the
            # prediction depend on what ran earlier in the process
            tracker._propagating += 1
            try:
                return propagate(propagator, *args, **kwargs)
            finally:
                tracker._propagating -= 1

        self._restore = [
            (torch.UntypedStorage, "resize_", resize),
            (ShardingPropagator, "_propagate_tensor_meta_non_cached", propagate),
        ]
        torch.UntypedStorage.resize_ = resize_  # type: ignore[method-assign,assignment]
        ShardingPropagator._propagate_tensor_meta_non_cached = propagate_meta  # type: ignore[method-assign,assignment]
        try:
            super().__enter__()
        except BaseException:
            self._put_back()
            raise
        return self

    def _put_back(self) -> None:
        for owner, attribute, original in self._restore:
            setattr(owner, attribute, original)
        self._restore = []

    def __exit__(self, *exc: Any) -> None:
        self._put_back()
        super().__exit__(*exc)

    def resized(self, storage: torch.UntypedStorage) -> None:
        """A storage resized in place (FSDP2 frees with ``resize_(0)``, re-allocates later)."""
        key = id(storage)
        entry = self._live.get(key)
        if entry is None or entry.ref() is not storage:
            return
        counted = not self.device_only or storage.device.type == self.allocator.device_type
        nbytes = self.allocator.rounded(storage.nbytes()) if counted else 0
        if nbytes == entry.nbytes:
            return
        if nbytes < entry.nbytes and self._pending:
            self._classify()
        self.current += nbytes - entry.nbytes
        entry.nbytes = nbytes
        phase = self._phase()
        if self.current > self.phase_peaks.get(phase, -1):
            self.phase_peaks[phase] = self.current
        if self.current > self.peak:
            self.peak = self.current
            self._pending = True
            self._peak_phase = phase
            self._peak_module = self._modules.current()
            self._grads_at_peak = self.ownership.grad_owners()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        from torch._guards import active_fake_mode
        from torch.distributed.tensor import DTensor

        if any(isinstance(kind, type) and issubclass(kind, DTensor) for kind in types):
            return NotImplemented  # DTensor desugars into local-shard operators, seen next
        kwargs = kwargs or {}
        if self._propagating or active_fake_mode() is not self._entry_fake:
            return func(*args, **kwargs)  # DTensor's sharding propagation on its own fakes
        ownership = self.ownership
        assert isinstance(ownership, ShardedOwnership)
        if func is torch.ops._c10d_functional.wait_tensor.default:
            # the fake kernel returns a new tensor; in eager the wait returns its input
            self.operators_seen += 1
            ownership.parallel.note(func, types)
            return args[0]
        if func is torch.ops.c10d._allgather_base_.default:
            ownership.tag_buffer(args[0], "all_gather_buffers")
        elif func is torch.ops.c10d._reduce_scatter_base_.default:
            ownership.tag_buffer(args[1], "reduce_scatter_buffers")
        return super().__torch_dispatch__(func, types, args, kwargs)


@contextlib.contextmanager
def fake_world(world_size: int, rank: int = 0) -> Iterator[Any]:
    """A fake process group of ``world_size`` ranks (this process is ``rank``) and its 1-D
    device mesh; torch.distributed is left as found (destroyed in ``finally``)."""
    import torch.distributed as dist
    import torch.distributed._tools.fake_collectives  # noqa: F401  (fake collective kernels)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if not isinstance(world_size, int) or isinstance(world_size, bool) or world_size < 1:
        raise ValueError(f"world_size must be a positive int of ranks, got {world_size!r}")
    if not isinstance(rank, int) or isinstance(rank, bool) or not 0 <= rank < world_size:
        raise ValueError(f"rank must be an int in [0, {world_size}), got {rank!r}")
    if dist.is_initialized():
        raise RuntimeError(
            "predict_sharded_peak_memory: a torch.distributed process group is already "
            "initialised in this process; the prediction makes its own fake one and will not "
            "replace yours. Call it from a process without a process group"
        )
    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world_size)
    try:
        yield init_device_mesh("cpu", (world_size,))
    finally:
        dist.destroy_process_group()


def predict_sharded_peak_memory(
    step: Callable[[Any], Any],
    *,
    world_size: int,
    rank: int = 0,
    device: str = "cuda",
    capacity_bytes: int | None = None,
    name: str | None = None,
) -> PredictionReport:
    """Predict one rank's peak memory of an FSDP2 training step on a fake world of
    ``world_size`` ranks, without a process group or accelerator.

    ``step(mesh)`` builds its model, applies ``fully_shard(..., mesh=mesh)`` (with any
    ``MixedPrecisionPolicy`` and ``reshard_after_forward``), builds its optimizer and inputs
    and runs one step; it is called once inside ``FakeTensorMode``. ``mesh`` is a 1-D
    ``DeviceMesh`` over the fake world (made outside fake mode: a mesh cannot be built on
    fake tensors). Everything else is as in :func:`predict_peak_memory`.
    """
    if not callable(step):
        raise TypeError(f"step must be a callable taking the mesh, got {type(step).__name__}")
    if capacity_bytes is not None and (
        not isinstance(capacity_bytes, int)
        or isinstance(capacity_bytes, bool)
        or capacity_bytes <= 0
    ):
        raise ValueError(f"capacity_bytes must be a positive int of bytes, got {capacity_bytes!r}")
    allocator = allocator_model(str(device))
    with fake_world(world_size, rank) as mesh:
        tracker, snapshot, diagnostics = _run(
            lambda: step(mesh),
            allocator,
            tracker_type=ShardedTracker,
            ownership_type=ShardedOwnership,
        )
    ownership = tracker.ownership
    assert isinstance(ownership, ShardedOwnership)
    diagnostics += _diagnostics_of(tracker, allocator)
    diagnostics += _sharding_diagnostics(ownership, world_size, rank)
    complete = not any(
        d.severity == "error" or d.code in ("untracked_tensor", UNMODELLED) for d in diagnostics
    )
    scope = allocator.scope
    if tracker.peak == 0 and not complete:
        peak = MetricResult.unavailable(unit="bytes", scope=scope, method=METHOD)
    else:
        peak = _result(tracker.peak, scope, complete)
    ranked = sorted(snapshot.by_module.items(), key=lambda item: (-item[1], item[0]))
    return PredictionReport(
        name=name,
        device=str(device),
        allocator=allocator.description,
        rounding_bytes=allocator.rounding_bytes,
        peak=peak,
        by_category={
            category: _result(snapshot.by_category.get(category, 0), scope, complete)
            for category in SHARDED_CATEGORIES
        },
        by_module={module: _result(value, scope, complete) for module, value in ranked},
        by_phase={
            phase: _result(tracker.phase_peaks[phase], scope, complete)
            for phase in PHASES
            if phase in tracker.phase_peaks
        },
        phase_at_peak=snapshot.phase,
        module_at_peak=snapshot.module,
        preexisting_bytes=MetricResult.complete(
            tracker.preexisting, unit="bytes", scope="preexisting_tensors", method=METHOD
        ),
        capacity_bytes=capacity_bytes,
        fits=_fits(peak, capacity_bytes),
        diagnostics=diagnostics,
        provenance=build_provenance(),
        world_size=world_size,
        rank=rank,
        sharding="fsdp2",
    )


def _sharding_diagnostics(
    ownership: ShardedOwnership, world_size: int, rank: int
) -> list[Diagnostic]:
    found = [
        Diagnostic(
            code="per_rank_prediction",
            severity="info",
            metric="peak",
            message=f"rank {rank} of a fake world of {world_size} (torch's fake process group: "
            "collectives return at once, no data moves); FSDP2 shards, all-gather and "
            "reduce-scatter buffers as that rank holds them",
        )
    ]
    found += unmodelled(
        ownership.parallel,
        modelled_collectives=FSDP_COLLECTIVES,
        modelled_subclasses=frozenset({"DTensor"}),
        predictor="predict_sharded_peak_memory (FSDP2 on a 1-D mesh)",
    )
    if ownership.offloaded:
        found.append(
            Diagnostic(
                code=UNMODELLED,
                metric="peak",
                count=ownership.offloaded,
                message=f"{ownership.offloaded} parameter(s) use FSDP2's CPUOffloadPolicy: their "
                "shards, gradients and optimizer state live in host memory and are copied in "
                "and out each step; that split is not modelled, so the per-rank figures count "
                "them on the device",
            )
        )
    unmanaged = ownership.unmanaged_dtensors()
    if unmanaged:
        listed = ", ".join(unmanaged[:5])
        found.append(
            Diagnostic(
                code=UNMODELLED,
                metric="peak",
                count=len(unmanaged),
                message=f"DTensor parameters that fully_shard does not manage ({listed}): "
                "tensor parallel or hand-placed shards are not modelled",
            )
        )
    return found
