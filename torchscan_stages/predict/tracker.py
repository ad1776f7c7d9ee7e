"""A dispatch mode over FakeTensorMode that follows live storage bytes and the peak.

Every storage an operator creates is counted once (views share it), through the allocator
model's rounding, and uncounted when the storage is freed (a weak-reference callback, as in
``measure.memory``). Storages are keyed by the device they would live on (the fake device),
never by their meta backing. At the peak the live set is classified once: lazily, on the
first free after the last rise, when the live set is still exactly the peak's.
"""

from __future__ import annotations

import functools
import weakref
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_unflatten

from ..measure.memory import storage_of
from .allocator import AllocatorModel
from .kernels import CORRECTED
from .modules import in_backward
from .ownership import Owned, Ownership
from .resident import Residents
from .routing import WorstCaseRouting
from .steady import SteadyState
from .stops import FAKE_LIMITS, FakeRunStopped, user_line

OUTSIDE = "(outside modules)"
_PLAIN = (torch.Tensor, torch.nn.Parameter)  # real tensors of torch's own types
_LIFTS = frozenset({torch.ops.aten.lift_fresh.default, torch.ops.aten.lift_fresh_copy.default})


@dataclass(slots=True)
class _Entry:
    ref: weakref.ref[Any]
    nbytes: int  # as the allocator counts it
    phase: str  # forward | backward | optimizer_step | outside
    module: str | None  # innermost module when created


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
        self._live: dict[int, _Entry] = {}
        self._seen_before: dict[int, weakref.ref[Any]] = {}
        self._provisional_host: set[int] = set()
        self._pending = False
        self._peak_phase: str | None = None
        self._peak_module: str | None = None
        self._grads_at_peak: dict[int, Any] = {}
        self.snapshot = PeakSnapshot()
        self.steady = SteadyState()
        self.assumptions: list[str] = []  # device semantics the prediction took
        self.routing: WorstCaseRouting | None = None  # routing="worst_case" only

    # ------------------------------------------------------------------ phase and owner
    def _phase(self) -> str:
        if in_backward():
            return "backward"
        if self.ownership.in_step:
            return "optimizer_step"
        return "forward" if self._modules.current() is not None else "outside"

    # ------------------------------------------------------------------------ accounting
    def _freed(self, key: int, reference: weakref.ref[Any]) -> None:
        entry = self._live.get(key)
        if entry is None or entry.ref is not reference:
            return
        if self._pending:
            self._classify(grads=self._grads_at_peak)
        del self._live[key]
        self.ownership.labels.pop(key, None)
        self._provisional_host.discard(key)
        self.current -= entry.nbytes
        self.steady.moved(key, -entry.nbytes, self.current)

    def _note_input(self, tensor: torch.Tensor) -> None:
        storage = storage_of(tensor)
        if storage is None or tensor.device.type == "meta":
            return
        key = id(storage)
        entry = self._live.get(key)
        if entry is not None and entry.ref() is storage:
            return
        if self.residents is not None and key in self.residents.storages:
            return
        before = self._seen_before.get(key)
        if before is not None and before() is storage:
            return
        self._seen_before[key] = weakref.ref(storage)
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
        device_type = tensor.device.type
        if device_type == self.allocator.device_type and not self.device_only:
            self._only_device_from_now()
        counted = not self.device_only or device_type == self.allocator.device_type
        nbytes = self.allocator.rounded(storage.nbytes()) if counted else 0
        entry = self._live.get(key)
        if entry is not None and entry.ref() is storage:
            if entry.nbytes == nbytes or key in self._provisional_host:
                return
            if nbytes < entry.nbytes and self._pending:
                self._classify()
            self.current += nbytes - entry.nbytes  # resized in place
            self.steady.moved(key, nbytes - entry.nbytes, self.current)
            entry.nbytes = nbytes
        else:
            before = self._seen_before.get(key)
            if before is not None and before() is storage:
                return
            if self._is_host_counter(tensor):
                self._provisional_host.add(key)
                nbytes = 0
            reference: weakref.ref[Any] = weakref.ref(storage, functools.partial(self._freed, key))
            self._live[key] = _Entry(reference, nbytes, phase, self._modules.current())
            self.current += nbytes
            self.steady.moved(key, nbytes, self.current)
        if self.current > self.phase_peaks.get(phase, -1):
            self.phase_peaks[phase] = self.current
        if self.current > self.peak:
            self.peak = self.current
            self._pending = True
            self._peak_phase = phase
            self._peak_module = self._modules.current()
            self._grads_at_peak = self.ownership.grad_owners()

    def _only_device_from_now(self) -> None:
        """The workload put its first tensor on the predicted device (a CUDA build): from
        now on only that device's storages count, and host storages (CPU tensors, the
        optimizer's step counters) weigh nothing. Before it, the device held nothing, so the
        device's peak so far is what is live on it now: zero."""
        self.device_only = True
        if self.allocator.device_type == "cpu":
            return
        self.host_counters = False
        for key in self._live:
            self._live[key].nbytes = 0
        self._provisional_host.clear()
        self.current = self.peak = 0
        self.phase_peaks.clear()
        self._pending = False
        self.snapshot = PeakSnapshot()

    def settle_host_counters(self, owned: Owned) -> list[int]:
        """After a step: provisional host counters that are not ``step`` state count again.

        Returns the re-added byte sizes (normally none).
        """
        readded: list[int] = []
        for key in list(self._provisional_host):
            if key in owned.host_only:
                continue
            entry = self._live.get(key)
            self._provisional_host.discard(key)
            if entry is None:
                continue
            storage = entry.ref()
            entry.nbytes = self.allocator.rounded(storage.nbytes()) if storage is not None else 0
            self.current += entry.nbytes
            self.steady.moved(key, entry.nbytes, self.current)
            readded.append(entry.nbytes)
            if self.current > self.peak:
                self.peak, self._pending = self.current, True
                self._grads_at_peak = self.ownership.grad_owners()
                self._peak_phase, self._peak_module = "optimizer_step", None
        return readded

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        self.operators_seen += 1
        self.ownership.parallel.note(func, types)
        phase = self._phase()
        if func not in _LIFTS:  # a literal (torch.tensor(0.0)) made real, then lifted to fake
            flat, spec = tree_flatten((args, kwargs))
            if self.residents is not None and any(type(item) in _PLAIN for item in flat):
                # real tensors never reach the fake mode: it runs number-taking operators
                # with no fake argument for real, which would change the user's tensors
                flat = [self.residents.convert(item) for item in flat]
                args, kwargs = tree_unflatten(flat, spec)
            for item in flat:
                if isinstance(item, torch.Tensor):
                    self._note_input(item)
        correction = CORRECTED.get(func)
        try:
            if correction is None:
                out = func(*args, **kwargs)
            else:
                out = correction(func, args, kwargs, self._uncorrected)
        except (*FAKE_LIMITS, RuntimeError, NotImplementedError) as error:
            # routing="worst_case": a data-dependent size at its shape bound (predict/routing.py)
            out = None if self.routing is None else self.routing.output(func, args, kwargs, error)
            if out is None:  # the fake kernel refused: where (module path, user line) and why
                raise FakeRunStopped(
                    str(func), self._modules.current(), user_line(), error
                ) from error
        for item in tree_flatten(out)[0]:
            if isinstance(item, torch.Tensor):
                self._note_output(item, str(func), phase)
        return out

    def _uncorrected(self, operator: str, message: str) -> None:
        self.divergent.setdefault(operator, message)

    # -------------------------------------------------------------------- classification
    def _classify(self, grads: dict[int, Any] | None = None) -> None:
        """Split the live set (== the peak's) by category, owner module and phase.

        ``grads``: the gradients' owners read at the peak, when called from a free callback
        (where reading ``.grad`` is unsafe); otherwise they are read now.
        """
        self._pending = False
        owned = self.ownership.snapshot(host_step_counters=self.host_counters, grads=grads)
        snap = PeakSnapshot(phase=self._peak_phase, module=self._peak_module)
        for key, entry in self._live.items():
            category = owned.category.get(key)
            label = self.ownership.labels.get(key) if category is None else None
            if category is not None:
                owner = owned.owner[key]
                module = owner if isinstance(owner, str) else self._names(owner)
            elif label is not None:  # a module already dropped: what it was when last seen
                category, module = label
            else:
                module = entry.module or OUTSIDE
                if entry.phase == "forward":
                    category = "activations"
                elif entry.phase in ("backward", "optimizer_step"):
                    category = "temporaries"
                    if entry.phase == "optimizer_step":
                        module = "optimizer"
                else:
                    category = "other"
            if key in owned.masters:
                snap.master_bytes += entry.nbytes
            snap.total += entry.nbytes
            snap.by_category[category] = snap.by_category.get(category, 0) + entry.nbytes
            snap.by_module[module] = snap.by_module.get(module, 0) + entry.nbytes
        self.snapshot = snap

    def finish(self) -> PeakSnapshot:
        """Classify a peak that no free followed; the snapshot of the whole run's peak."""
        if self._pending:
            self._classify()
        return self.snapshot
