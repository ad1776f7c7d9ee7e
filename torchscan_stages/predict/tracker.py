"""A dispatch mode over FakeTensorMode that follows live storage bytes and the peak.

Every storage an operator creates is counted once (views share it), through the allocator
model's rounding, and uncounted when the storage is freed (the shared storage ledger,
``measure/ledger.py``, as in ``measure.memory``). Storages are keyed by the device they
would live on (the fake device), never by their meta backing.

Linear cost: a storage's role (parameter, buffer, gradient, optimizer state, an FSDP2
buffer) is given to its entry when the event that makes it so happens (``ownership.py``:
registration, a module's forward, a gradient's accumulation, an optimizer step), each
event costing only the tensors it concerns. A new peak costs O(1): its event number is
remembered, and the storages freed or resized after it are kept aside. The peak's live set
(made by then, not freed before it) is classified once, at the end, by the roles that held
at its moment.
"""

from __future__ import annotations

import dataclasses
import weakref
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_unflatten

from ..analysis.operators import never_compiled
from ..measure.ledger import Held, StorageLedger, storage_of
from .allocator import AllocatorModel
from .kernels import CORRECTED
from .modules import in_backward
from .ownership import Ownership
from .resident import Residents
from .routing import WorstCaseRouting
from .steady import SteadyState
from .stops import FAKE_LIMITS, FakeRunStopped, user_line
from .values import KnownValues

OUTSIDE = "(outside modules)"
_PLAIN = (torch.Tensor, torch.nn.Parameter)  # real tensors of torch's own types
_LIFTS = frozenset({torch.ops.aten.lift_fresh.default, torch.ops.aten.lift_fresh_copy.default})


def tensors_in(tree: Any, into: list[torch.Tensor]) -> list[torch.Tensor]:
    """The tensors in an operator's arguments or outputs, appended to ``into`` in
    ``tree_flatten``'s order (tuples, named tuples, lists and dict values, depth first).

    Why not ``tree_flatten``: it builds a spec node per container, twice per operator, and
    was about a tenth of a sharded prediction's CPU time; an operator's schema nests only
    those containers, so the walk finds the same tensors in the same order.
    """
    if isinstance(tree, torch.Tensor):
        into.append(tree)
    elif isinstance(tree, (tuple, list)):
        for item in tree:
            tensors_in(item, into)
    elif isinstance(tree, dict):
        for item in tree.values():
            tensors_in(item, into)
    return into


@dataclass(slots=True)
class Role:
    """What a storage is from event ``since`` on, and who owns it."""

    category: str
    owner: weakref.ref[torch.nn.Module] | None  # a module; None for the optimizer, collectives
    name: str  # the owner's name when given (what a dropped module was)
    since: int
    rank: int = 0  # a role of higher rank (an FSDP2 one) is not replaced by a lower one
    master: bool = False  # an optimizer-updated tensor no module owns (a master weight)


@dataclass(slots=True)
class _Entry(Held):
    phase: str  # forward | backward | optimizer_step | outside
    module: str | None  # innermost module when created
    created: int = 0  # event number of its creation (or of its last resize)
    roles: list[Role] = field(default_factory=list)  # shared by the copies of one storage


@dataclass(slots=True)
class PeakSnapshot:
    """The peak's live bytes split by category, owning module and phase."""

    total: int = 0
    by_category: dict[str, int] = field(default_factory=dict)
    by_module: dict[str, int] = field(default_factory=dict)
    phase: str | None = None
    module: str | None = None
    master_bytes: int = 0  # optimizer_state bytes that are master copies of the weights


class PeakTracker(TorchDispatchMode):
    """Live and peak bytes of storages created under it; pushed above a FakeTensorMode."""

    def __init__(
        self,
        allocator: AllocatorModel,
        ownership: Ownership,
        modules: Any,
        names: Any,
        residents: Residents | None = None,
    ) -> None:
        super().__init__()
        self.allocator = allocator
        self.residents = residents
        self.ownership = ownership
        self._modules = modules  # operators.ModuleStack: current() and _names
        self._names = names  # callable: module -> dotted name
        self.current = 0
        self.peak = 0
        self.phase_peaks: dict[str, int] = {}
        self.preexisting = 0
        self.untracked: dict[str, int] = {}
        self.operators_seen = 0
        self.divergent: dict[str, str] = {}  # operator -> why its fake bytes differ
        self.meta_outputs = 0  # outputs on the meta device: no bytes on any real device
        self.host_counters = allocator.device_type != "cpu"
        # True once a tensor lives on the predicted device itself (not CPU fakes modelling it)
        self.device_only = allocator.device_type == "cpu"
        self._ledger: StorageLedger[_Entry] = StorageLedger(self._freed)
        self._provisional_host: set[int] = set()
        self._seq = 0  # events (creations, frees, resizes, timed roles) so far
        self._peak_seq = -1  # the event of the peak
        self._aside: list[_Entry] = []  # freed or resized since the peak, live at it
        self._peak_phase: str | None = None
        self._peak_module: str | None = None
        self.snapshot = PeakSnapshot()
        self.steady = SteadyState(residents.storages if residents is not None else None)
        self.assumptions: list[str] = []  # device semantics the prediction took
        self.routing: WorstCaseRouting | None = None  # routing="worst_case" only
        self.values: KnownValues | None = None  # small tensors' real values (values.py)
        self.host_memory: Any = None  # save_on_cpu's host figure (offload.py), CUDA only
        ownership.assign = self.assign_role

    # ------------------------------------------------------------------ phase and owner
    def _phase(self) -> str:
        if in_backward():
            return "backward"
        if self.ownership.in_step:
            return "optimizer_step"
        return "forward" if self._modules.current() is not None else "outside"

    def assign_role(
        self,
        key: int,
        category: str,
        owner: Any,
        name: str,
        *,
        timed: bool = False,
        keep: bool = False,
        rank: int = 0,
        master: bool = False,
    ) -> None:
        """The live storage ``key`` is ``category`` of ``owner`` (a module, or None).

        A role holds from the storage's creation, as a snapshot taken at the peak would
        have found it, unless ``timed``: then from now on (a gradient accumulated now was a
        temporary before). ``keep``: not over a role of the same rank (a scan that cannot
        tell when the role began). A role of lower ``rank`` never replaces a higher one; a
        higher one takes over the timing of the one it replaces. A storage several modules
        share (tied weights, FSDP2's flat buffers) stays with the first live owner.
        """
        entry = self._ledger.live.get(key)
        if entry is None:
            return
        roles = entry.roles
        last = roles[-1] if roles else None
        since = entry.created
        if last is not None:
            if rank < last.rank or (keep and rank == last.rank):
                return
            if rank == last.rank and last.category == category:
                held = last.owner() if last.owner is not None else None
                if held is owner or (held is None and last.owner is None and owner is None):
                    last.name, last.master = name, last.master or master
                    return
                if held is not None:
                    return
            elif rank > last.rank:
                since = last.since
        if timed:
            self._seq += 1
            since = self._seq
            if category == "gradients":
                self.steady.accumulated(key)
        module = weakref.ref(owner) if isinstance(owner, torch.nn.Module) else None
        roles.append(Role(category, module, name, since, rank, master))

    # ------------------------------------------------------------------------ accounting
    def _freed(self, key: int, entry: _Entry) -> None:
        self._seq += 1
        if entry.created <= self._peak_seq:
            self._aside.append(entry)  # part of the peak's live set
        self._provisional_host.discard(key)
        self.current -= entry.nbytes
        self.steady.moved(key, -entry.nbytes, self.current, freed=True)

    def _note_input(self, tensor: torch.Tensor) -> None:
        storage = storage_of(tensor)
        if storage is None or tensor.device.type == "meta":
            return
        key = id(storage)
        if self.residents is not None and key in self.residents.storages:
            return
        if self._ledger.note_before(key, storage):
            self.preexisting += storage.nbytes()

    def _is_host_counter(self, tensor: torch.Tensor) -> bool:
        """A 0-dim float32 tensor made inside a non-capturable optimizer step: its ``step``
        counter, which stays in host memory on an accelerator (checked after the step)."""
        return (
            self.host_counters
            and self.ownership.in_step > 0
            and tensor.dim() == 0
            and tensor.dtype == torch.float32
        )

    def _counted(self, storage: Any, device_type: str, *, first: bool = True) -> int:
        """Bytes the allocator counts for ``storage`` on ``device_type``; ``first``: an
        operator's output, which may be the first tensor on the predicted device."""
        if first and device_type == self.allocator.device_type and not self.device_only:
            self._only_device_from_now()
        counted = not self.device_only or device_type == self.allocator.device_type
        return self.allocator.rounded(storage.nbytes()) if counted else 0

    def _note_output(self, tensor: torch.Tensor, operator: str, phase: str) -> None:
        storage = storage_of(tensor)
        if storage is None:
            self.untracked[operator] = self.untracked.get(operator, 0) + 1
            return
        if tensor.device.type == "meta":
            self.meta_outputs += 1
            return
        key = id(storage)
        if self.residents is not None and key in self.residents.storages:
            return  # a resident tensor written in place (or a view of it): not a new allocation
        nbytes = self._counted(storage, tensor.device.type)
        entry = self._ledger.held(key, storage)
        if entry is not None:
            if key not in self._provisional_host:
                self.resize_entry(entry, key, nbytes, phase)
            return
        if self._ledger.seen_before(key, storage):
            return
        if self._is_host_counter(tensor):
            self._provisional_host.add(key)
            nbytes = 0
        self._seq += 1
        module = self._modules.current()
        self._ledger.add(key, storage, lambda ref: _Entry(ref, 0, phase, module, self._seq))
        self._moved(self._ledger.live[key], key, nbytes, phase, module)

    def resize_entry(self, entry: _Entry, key: int, nbytes: int, phase: str) -> None:
        """A live storage now counts ``nbytes`` (resized in place, or re-counted)."""
        if nbytes == entry.nbytes:
            return
        self._seq += 1
        if entry.created <= self._peak_seq:  # the peak saw the old size: keep it so
            self._aside.append(dataclasses.replace(entry))
            entry.created = self._seq
        self._moved(entry, key, nbytes, phase, self._modules.current())

    def _moved(self, entry: _Entry, key: int, nbytes: int, phase: str, module: Any) -> None:
        delta = nbytes - entry.nbytes
        entry.nbytes = nbytes
        self.current += delta
        self.steady.moved(key, delta, self.current)
        if self.current > self.phase_peaks.get(phase, -1):
            self.phase_peaks[phase] = self.current
        if self.current > self.peak:
            self.peak = self.current
            self._peak_seq = self._seq  # the live set now is the peak's (classified at the end)
            self._aside.clear()  # freed before this peak: not part of it
            self._peak_phase, self._peak_module = phase, module

    def _only_device_from_now(self) -> None:
        """The workload put its first tensor on the predicted device (a CUDA build): from
        now on only that device's storages count, and host storages (CPU tensors, the
        optimizer's step counters) weigh nothing. Before it, the device held nothing, so the
        device's peak so far is what is live on it now: zero."""
        self.device_only = True
        if self.allocator.device_type == "cpu":
            return
        self.host_counters = False
        for entry in self._ledger.live.values():
            entry.nbytes = 0
        self._provisional_host.clear()
        self.current = self.peak = 0
        self.phase_peaks.clear()
        self._peak_seq = -1
        self._aside.clear()
        self.snapshot = PeakSnapshot()

    def settle_host_counters(self, host_only: set[int]) -> list[int]:
        """After a step: provisional host counters that are not ``step`` state count again.

        ``host_only``: the storage keys of the optimizers' host-side step counters. Returns
        the re-added byte sizes (normally none).
        """
        readded: list[int] = []
        for key in list(self._provisional_host):
            if key in host_only:
                continue
            entry = self._ledger.live.get(key)
            self._provisional_host.discard(key)
            if entry is None:
                continue
            storage = entry.ref()
            nbytes = self.allocator.rounded(storage.nbytes()) if storage is not None else 0
            before = self.peak
            self.resize_entry(entry, key, nbytes, "optimizer_step")
            readded.append(nbytes)
            if self.peak > before:
                self._peak_module = None
        return readded

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # torch wraps a subclass's __torch_dispatch__ in torch._dynamo.disable (Python frames
        # and eval-frame swaps on every operator, a subclass's call to super() paying twice);
        # never_compiled below keeps Dynamo off the handlers' code objects instead
        return False

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        return self.track(func, types, args, kwargs or {})

    def track(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        """Run ``func`` below this mode, noting its inputs and counting its new storages."""
        self.operators_seen += 1
        self.ownership.parallel.note(func, types)
        phase = self._phase()
        inputs = None
        if func not in _LIFTS:  # a literal (torch.tensor(0.0)) made real, then lifted to fake
            inputs = tensors_in(kwargs, tensors_in(args, []))
            if self.residents is not None and any(type(item) in _PLAIN for item in inputs):
                # real tensors never reach the fake mode: it runs number-taking operators
                # with no fake argument for real, which would change the user's tensors
                flat, spec = tree_flatten((args, kwargs))
                flat = [self._converted(item) for item in flat]
                args, kwargs = tree_unflatten(flat, spec)
                inputs = tensors_in(kwargs, tensors_in(args, []))
            for item in inputs:
                self._note_input(item)
        correction = CORRECTED.get(func)
        try:
            if correction is None:
                out = func(*args, **kwargs)
            else:
                out = correction(func, args, kwargs, self._uncorrected)
        except (*FAKE_LIMITS, RuntimeError, NotImplementedError, AssertionError) as error:
            # AssertionError: a fake kernel torch left unimplemented ("NYI: aten._pin_memory")
            out = self._refused(func, args, kwargs, error)
        else:
            if self.values is not None:
                self.values.follow(func, args, kwargs, out, inputs)
        if self.steady.watching:  # after a first step: what it writes is kept for the next
            self.steady.wrote(func, args)
        name = None
        for item in tensors_in(out, []):
            name = str(func) if name is None else name
            self._note_output(item, name, phase)
        return out

    def _converted(self, item: Any) -> Any:
        """A real tensor an operator received: its fake copy, which keeps its value."""
        assert self.residents is not None
        fake = self.residents.convert(item)
        if fake is not item and self.values is not None:
            self.values.learn(fake, item)
        return fake

    def _refused(self, func: Any, args: Any, kwargs: Any, error: Exception) -> Any:
        """The fake kernel refused: answer from known values (a data-dependent operator on
        values the real inputs fix), at the routing bound (routing="worst_case",
        predict/routing.py), or stop, saying where (module path, user line) and why."""
        if self.values is not None:
            answered, out = self.values.answer(func, args, kwargs)
            if answered:
                return out
        out = None if self.routing is None else self.routing.output(func, args, kwargs, error)
        if out is None:
            raise FakeRunStopped(str(func), self._modules.current(), user_line(), error) from error
        return out

    def _uncorrected(self, operator: str, message: str) -> None:
        self.divergent.setdefault(operator, message)

    # -------------------------------------------------------------------- classification
    def _role_at_peak(self, entry: _Entry) -> Role | None:
        for role in reversed(entry.roles):
            if role.since <= self._peak_seq:
                return role
        return None

    def _owner_name(self, role: Role) -> str:
        module = role.owner() if role.owner is not None else None
        return role.name if module is None else str(self._names(module))

    def _classified(self, entry: _Entry) -> tuple[str, str, bool]:
        """(category, owning module, master copy) of one storage of the peak's live set."""
        role = self._role_at_peak(entry)
        if role is not None:
            return role.category, self._owner_name(role), role.master
        module = entry.module or OUTSIDE
        if entry.phase == "forward":
            return "activations", module, False
        if entry.phase == "optimizer_step":
            return "temporaries", "optimizer", False
        if entry.phase == "backward":
            return "temporaries", module, False
        return "other", module, False

    def finish(self) -> PeakSnapshot:
        """Split the peak's live set by category, owner module and phase, once, at the end:
        what was made by the peak and not freed before it (still live, or set aside)."""
        self.ownership.scan()  # roles no event announced (gradients set by hand)
        snap = PeakSnapshot(phase=self._peak_phase, module=self._peak_module)
        at_peak = [e for e in self._ledger.live.values() if e.created <= self._peak_seq]
        for entry in at_peak + self._aside:
            category, module, master = self._classified(entry)
            if master:
                snap.master_bytes += entry.nbytes
            snap.total += entry.nbytes
            snap.by_category[category] = snap.by_category.get(category, 0) + entry.nbytes
            snap.by_module[module] = snap.by_module.get(module, 0) + entry.nbytes
        self.snapshot = snap
        return snap

    def restart_peak(self) -> tuple[int, dict[str, int], PeakSnapshot, str | None, Any]:
        """A new peak from what is live now (a second call of the step); returns the first
        period's (peak, phase peaks, snapshot, phase and module at the peak) to put back."""
        first = (self.peak, self.phase_peaks, self.snapshot, self._peak_phase, self._peak_module)
        self.peak, self.phase_peaks, self._peak_seq = self.current, {}, self._seq
        self._aside.clear()
        return first

    def put_back(self, first: tuple[int, dict[str, int], PeakSnapshot, str | None, Any]) -> None:
        """The first period's figures again (after :meth:`restart_peak`)."""
        self.peak, self.phase_peaks, self.snapshot, self._peak_phase, self._peak_module = first


never_compiled(PeakTracker.__torch_dispatch__.__code__)
never_compiled(PeakTracker.track.__code__)
