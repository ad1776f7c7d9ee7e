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
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch

from ..analysis.operators import never_compiled
from ..report import Diagnostic, PredictionReport
from .allocator import allocator_model
from .assemble import check_capacity, check_name, per_rank_report
from .ownership import Ownership
from .parallelism import UNMODELLED, unmodelled
from .peak import _run
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
_get_dispatch_mode = torch._C._get_dispatch_mode
_FAKE = torch._C._TorchDispatchModeKey.FAKE
_PIN_MEMORY = torch.ops.aten._pin_memory.default
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
    """Ownership that knows FSDP2's sharded and unsharded parameters and its comm buffers.

    Their roles rank above the single-device ones (an unsharded parameter also sits in its
    module while it runs) and are given at the events that reveal them: a collective's
    buffer when the collective runs, a ``fully_shard``-ed module's parameters before and
    after its forward, an unsharded gradient when it is accumulated, all of them when an
    optimizer steps and at the end.
    """

    def __init__(self) -> None:
        super().__init__()
        # DTensor parameters seen (id -> name) and those FSDP2 manages, over the whole run:
        # a module seen before the root's first forward does not know its FSDP state yet
        self.dtensor_params: dict[int, str] = {}
        self.managed: set[int] = set()
        self.offloaded = 0  # FSDP2 parameters with CPUOffloadPolicy: host shards, not modelled
        self._unsharded: dict[int, tuple[weakref.ref[torch.Tensor], weakref.ref[Any]]] = {}

    def tag_buffer(self, tensor: torch.Tensor, category: str) -> None:
        self.role(tensor, category, None, COLLECTIVES_OWNER, rank=1)

    def __enter__(self) -> ShardedOwnership:
        from torch.nn.modules import module as module_hooks

        super().__enter__()
        self._handles.append(module_hooks.register_module_forward_hook(self._after_forward))
        return self

    def _module_seen(self, module: torch.nn.Module, *_: Any) -> None:
        super()._module_seen(module)
        self._fsdp_roles(module)
        self._note_dtensors((module,))

    def _after_forward(self, module: torch.nn.Module, *_: Any) -> None:
        self._fsdp_roles(module)  # its unsharded parameters exist once it has run

    def _step_pre(self, optimizer: torch.optim.Optimizer, *_: Any) -> None:
        if self.in_step == 0:
            self._all_fsdp_roles()
        super()._step_pre(optimizer)

    def scan(self) -> None:
        self._all_fsdp_roles()
        super().scan()

    def _all_fsdp_roles(self) -> None:
        for module in list(self._modules):
            self._fsdp_roles(module)
        self._note_dtensors(list(self._modules))

    def _fsdp_roles(self, module: torch.nn.Module) -> None:
        """The roles of one ``fully_shard``-ed module's ``FSDPParam`` objects."""
        from torch.distributed.fsdp import FSDPModule

        if not isinstance(module, FSDPModule):
            return
        state = module._get_fsdp_state()
        for group in getattr(state, "_fsdp_param_groups", None) or [state._fsdp_param_group]:
            for fsdp_param in getattr(group, "fsdp_params", ()):
                self._fsdp_param_roles(fsdp_param)

    def _fsdp_param_roles(self, fsdp_param: Any) -> None:
        owner = fsdp_param._module_info.module
        name = self._name(owner)
        sharded = fsdp_param.sharded_param
        if getattr(fsdp_param, "offload_to_cpu", False) and id(sharded) not in self.managed:
            self.offloaded += 1
        self.managed.add(id(sharded))
        self.role(sharded, "parameters", owner, name, rank=1)
        self.role(sharded.grad, "gradients", owner, name, keep=True, rank=1)
        unsharded = getattr(fsdp_param, "_unsharded_param", None)
        if unsharded is None:
            return
        self.managed.add(id(unsharded))
        self.role(unsharded, "unsharded_parameters", owner, name, rank=1)
        self.role(unsharded.grad, "unsharded_gradients", owner, name, keep=True, rank=1)
        known = self._unsharded.get(id(unsharded))
        if known is None or known[0]() is not unsharded:
            self._unsharded[id(unsharded)] = (weakref.ref(unsharded), weakref.ref(fsdp_param))
            if unsharded.requires_grad and unsharded.is_leaf:
                hook = unsharded.register_post_accumulate_grad_hook(self._unsharded_grad)
                self._handles.append(hook)

    def _unsharded_grad(self, unsharded: torch.Tensor) -> None:
        known = self._unsharded.get(id(unsharded))
        fsdp_param = known[1]() if known is not None else None
        if fsdp_param is not None:
            owner = fsdp_param._module_info.module
            name = self._name(owner)
            self.role(unsharded.grad, "unsharded_gradients", owner, name, timed=True, rank=1)

    def _note_dtensors(self, modules: Iterable[torch.nn.Module]) -> None:
        from torch.distributed.tensor import DTensor

        for module in modules:
            for name, param in module._parameters.items():
                if isinstance(param, DTensor):
                    self.dtensor_params[id(param)] = f"{type(module).__name__}.{name}"

    def unmanaged_dtensors(self) -> list[str]:
        """DTensor parameters FSDP2 does not manage: tensor parallel or hand-placed shards."""
        self._note_dtensors(list(self._modules))
        return sorted(
            {name for key, name in self.dtensor_params.items() if key not in self.managed}
        )


class ShardedTracker(PeakTracker):
    """``PeakTracker`` for one rank of an FSDP2 step: local shards, resizes, comm buffers."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._entry_fake: Any = None
        # operator types seen -> whether one is a DTensor; the collectives (set on entry:
        # torch.distributed is imported only when a sharded prediction runs)
        self._distributed_types: dict[Any, bool] = {}
        self._dtensor: Any = None
        self._wait: Any = None
        self._all_gather: Any = None
        self._reduce_scatter: Any = None
        self._propagating = 0
        self._restore: list[tuple[Any, str, Any]] = []

    def __enter__(self) -> ShardedTracker:
        from torch._guards import active_fake_mode
        from torch.distributed.tensor import DTensor
        from torch.distributed.tensor._sharding_prop import ShardingPropagator

        self._entry_fake = active_fake_mode()
        self._dtensor = DTensor
        self._wait = torch.ops._c10d_functional.wait_tensor.default
        self._all_gather = torch.ops.c10d._allgather_base_.default
        self._reduce_scatter = torch.ops.c10d._reduce_scatter_base_.default
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
        entry = self._ledger.held(key, storage)
        if entry is not None:
            nbytes = self._counted(storage, storage.device.type, first=False)
            self.resize_entry(entry, key, nbytes, self._phase())

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # as PeakTracker's: never_compiled below, not torch's wrapper

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        distributed = self._distributed_types.get(types)
        if distributed is None:
            dtensor = self._dtensor
            distributed = any(isinstance(k, type) and issubclass(k, dtensor) for k in types)
            self._distributed_types[types] = distributed
        if distributed:
            return NotImplemented  # DTensor desugars into local-shard operators, seen next
        kwargs = kwargs or {}
        if self._propagating or _get_dispatch_mode(_FAKE) is not self._entry_fake:
            return func(*args, **kwargs)  # DTensor's sharding propagation on its own fakes
        ownership = self.ownership
        assert isinstance(ownership, ShardedOwnership)
        if func is self._wait:
            # the fake kernel returns a new tensor; in eager the wait returns its input
            self.operators_seen += 1
            ownership.parallel.note(func, types)
            return args[0]
        if func is _PIN_MEMORY:
            # FSDP2's CPUOffloadPolicy(pin_memory=True) pins the host shards: a copy into
            # page-locked host memory, which has no fake kernel (NYI); a clone has its bytes
            return self.track(torch.ops.aten.clone.default, types, (args[0],), {})
        if func is self._all_gather:
            ownership.tag_buffer(args[0], "all_gather_buffers")
        elif func is self._reduce_scatter:
            ownership.tag_buffer(args[1], "reduce_scatter_buffers")
        return self.track(func, types, args, kwargs)


never_compiled(ShardedTracker.__torch_dispatch__.__code__)


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
    check_capacity(capacity_bytes)
    check_name(name)
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
    return per_rank_report(
        tracker,
        snapshot,
        diagnostics,
        allocator,
        scheme=("fsdp2", SHARDED_CATEGORIES, _sharding_diagnostics(ownership, world_size, rank)),
        world=(world_size, rank),
        device=str(device),
        capacity_bytes=capacity_bytes,
        name=name,
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
    if not ownership.managed:
        found.append(
            Diagnostic(
                code=UNMODELLED,
                metric="peak",
                message="the step never called fully_shard: no parameter was sharded, so "
                "these are the unsharded step's figures, not an FSDP2 rank's; apply "
                "fully_shard(module, mesh=mesh) inside the step (or use predict_peak_memory "
                "for one device)",
            )
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
