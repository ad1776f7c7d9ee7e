"""Peak PyTorch memory of one workload call, by scope; scopes are never summed.

* ``cpu_tracked_tensors`` (method ``operator_dispatch``): a TorchDispatchMode sees every
  tensor produced by an ATen operator during the call; each new storage is counted once
  (views share it) and uncounted when it is freed (a weak-reference callback). The value is
  the peak of live bytes created during the call. Storages that existed before the call
  and were read by it (parameters, inputs) are reported separately as a baseline; one of
  them that grows in place during the call (FSDP2's ``resize_`` re-growth of unsharded
  parameters) counts its growth, as the allocator does. Memory
  that never becomes a tensor visible to dispatch (kernel scratch space, numpy buffers
  wrapped by ``torch.from_numpy``, allocator caching, the Python heap) is out of scope —
  that is what process RSS measures.
* ``accelerator_allocated`` / ``accelerator_reserved`` (method ``allocator_stats``): CUDA's
  caching allocator peaks after ``torch.cuda.reset_peak_memory_stats``; absolute values
  (including memory allocated before the call, reported as a baseline).
* ``mps_tracked_tensors``: the dispatch tracker for MPS storages (MPS has no peak statistic).

The tracker is torch's public dispatch-mode mechanism (``torch.utils._python_dispatch``,
the one FlopCounterMode and torch's own memory trackers build on); it is not deprecated.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from ..devices import check_workload, execution_record, resolve_device
from ..provenance import build_provenance
from ..report import BenchmarkReport, Diagnostic, MemorySection, MetricResult
from ..workloads import (
    Workload,
    WorkTally,
    eager_compiled_code,
    empty_work_diagnostic,
    lazy_output_diagnostic,
    no_operators_diagnostic,
)
from .ledger import Held, StorageLedger, storage_of

# a collective's tensors are the caller's (seen where they were made or read) or the backend's
# own scratch, made in its worker threads where no dispatch mode runs (gloo's flat copies):
# taking those for tensors from before the call inflated the baseline
_COLLECTIVE_NAMESPACES = frozenset({"c10d", "_c10d_functional", "c10d_functional"})


@dataclass(slots=True)
class _Held(Held):
    device_type: str


def _follow_waits(tracker: TrackedTensorMemory) -> Any:
    """Count the calls in flight of ``torch.distributed.Work.wait`` (patched while the tracker
    runs; returns the original, or None when torch.distributed is not imported). A gloo
    collective finishes inside ``wait()``, reading the flat scratch its worker thread made
    where no dispatch mode runs, and at times (4 ranks) making more of it on the calling
    thread; a tensor first seen or made there is the backend's scratch, neither a tensor
    from before the call nor an allocation of the step, so it is in neither figure, whichever
    thread gloo finished on."""
    distributed = sys.modules.get("torch.distributed")
    work = getattr(distributed, "Work", None)
    if work is None:
        return None
    original = work.wait

    def wait(self: Any, *args: Any, **kwargs: Any) -> Any:
        tracker.waiting += 1
        try:
            return original(self, *args, **kwargs)
        finally:
            tracker.waiting -= 1

    work.wait = wait
    return original


def _is_view_operator(func: Any) -> bool:
    """Whether the operator returns an alias it does not write (a view), from its schema."""
    try:
        returns = func._schema.returns
    except AttributeError:
        return False
    return any(r.alias_info is not None and not r.alias_info.is_write for r in returns)


class TrackedTensorMemory(TorchDispatchMode):
    """Dispatch mode recording the peak of live tensor-storage bytes created under it.

    Counts per device type ("cpu", "cuda", "mps"). Restores nothing global beyond the mode
    stack, which ``with`` pops also when the workload raises.
    """

    def __init__(self) -> None:
        super().__init__()
        self.current: dict[str, int] = {}
        self.peak: dict[str, int] = {}
        self.preexisting: dict[str, int] = {}
        self.untracked: dict[str, int] = {}
        self._ledger: StorageLedger[_Held] = StorageLedger(self._freed)
        self.grad_modes: set[bool] = set()
        self.tally = WorkTally()  # operator calls and the elements of the work they did
        self._resize: Any = None
        self.collectives = 0  # collective operators run (their backend's scratch is unseen)
        self.waiting = 0  # inside a collective's Work.wait(): its completion code runs here
        self._wait: Any = None

    def __enter__(self) -> TrackedTensorMemory:
        """Also follow ``UntypedStorage.resize_``, which no dispatch mode sees: FSDP2 frees
        and re-allocates unsharded parameters through it. Restored on exit."""
        self._resize = resize = torch.UntypedStorage.resize_
        tracker = self

        def resize_(storage: torch.UntypedStorage, size: int) -> Any:
            before = storage.nbytes()
            out = resize(storage, size)
            tracker._resized(storage, before)
            return out

        torch.UntypedStorage.resize_ = resize_  # type: ignore[method-assign,assignment]
        self._wait = _follow_waits(self)
        try:
            super().__enter__()
        except BaseException:
            self._put_back()
            raise
        return self

    def _put_back(self) -> None:
        torch.UntypedStorage.resize_ = self._resize  # type: ignore[method-assign]
        if self._wait is not None:
            sys.modules["torch.distributed"].Work.wait = self._wait
            self._wait = None

    def __exit__(self, *exc: Any) -> None:
        self._put_back()
        super().__exit__(*exc)

    def _resized(self, storage: Any, before: int) -> None:
        """``storage`` now holds ``storage.nbytes()``, ``before`` a moment ago. One made in
        the call is recounted; one from before the call (an FSDP2 parameter built and
        stepped before, freed with ``resize_(0)`` and re-grown each step) is held from now on,
        its change counted as the call's: re-growth is an allocation, the shrink a free, as
        the allocator sees them."""
        key = id(storage)
        device_type = storage.device.type
        if device_type == "meta":
            return
        entry = self._ledger.held(key, storage)
        if entry is None:
            known = self._ledger.size_before(key, storage)
            entry = self._ledger.adopt(
                key,
                storage,
                lambda ref: _Held(ref, before if known is None else known, device_type),
            )
        if entry.nbytes != storage.nbytes():
            self._count(entry, storage.nbytes())

    def _count(self, entry: _Held, nbytes: int) -> None:
        """``entry`` now holds ``nbytes``: move its device's current bytes and peak."""
        device_type = entry.device_type
        self.current[device_type] = self.current.get(device_type, 0) + nbytes - entry.nbytes
        entry.nbytes = nbytes
        self.peak[device_type] = max(self.peak.get(device_type, 0), self.current[device_type])

    def _freed(self, key: int, entry: _Held) -> None:
        device_type = entry.device_type
        self.current[device_type] = self.current.get(device_type, 0) - entry.nbytes

    def _note_input(self, tensor: torch.Tensor) -> None:
        storage = storage_of(tensor)
        if storage is None or storage.device.type == "meta" or self.waiting:
            return
        if self._ledger.note_before(id(storage), storage):
            device_type = storage.device.type
            self.preexisting[device_type] = self.preexisting.get(device_type, 0) + storage.nbytes()

    def _note_output(self, tensor: torch.Tensor, operator: str) -> None:
        storage = storage_of(tensor)
        if storage is None:
            self.untracked[operator] = self.untracked.get(operator, 0) + 1
            return
        device_type = storage.device.type
        if device_type == "meta":
            return
        key = id(storage)
        entry = self._ledger.held(key, storage)
        if entry is None and self.waiting:
            return  # the collective's own scratch, made on this thread only at times
        if entry is None:
            before = self._ledger.size_before(key, storage)
            if before is not None:  # from before the call: only a change of size counts
                if before != storage.nbytes():  # resized in place (aten.resize_, out=)
                    self._resized(storage, before)
                return
            entry = self._ledger.add(key, storage, lambda ref: _Held(ref, 0, device_type))
        self._count(entry, storage.nbytes())  # new, or resized in place

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if any(getattr(kind, "__name__", None) == "DTensor" for kind in types):
            # let DTensor run its local-shard operators, which come through here next: the
            # DTensor wrapper itself owns no storage (its local tensor does)
            return NotImplemented
        kwargs = kwargs or {}
        self.grad_modes.add(torch.is_grad_enabled())
        collective = getattr(func, "namespace", None) in _COLLECTIVE_NAMESPACES
        if collective:
            self.collectives += 1
        else:  # a collective's tensors are the caller's, or its backend's own (see above)
            for item in tree_flatten((args, kwargs))[0]:
                if isinstance(item, torch.Tensor):
                    self._note_input(item)
        out = func(*args, **kwargs)
        # a view of a weight (``aten.t``) is no work done
        self.tally.add(args, kwargs, out, _is_view_operator(func))
        for item in tree_flatten(out)[0]:
            if isinstance(item, torch.Tensor):
                self._note_output(item, str(func))
        return out


@dataclass
class MemoryRun:
    """Results, baselines and diagnostics of one memory pass."""

    section: MemorySection
    diagnostics: list[Diagnostic] = field(default_factory=list)
    calls: int = 1
    grad_enabled: bool | None = None  # grad mode the workload's operators ran under


def _tracked_result(
    tracker: TrackedTensorMemory, device_type: str, scope: str
) -> tuple[MetricResult, list[Diagnostic]]:
    peak = tracker.peak.get(device_type, 0)
    if not tracker.untracked:
        return MetricResult.complete(
            peak, unit="bytes", scope=scope, method="operator_dispatch"
        ), []
    diagnostics = [
        Diagnostic(
            code="untracked_tensor",
            metric=f"memory.{scope}",
            operator=operator,
            count=count,
            message=f"{count} output tensor(s) of {operator} have no readable storage "
            "(sparse or subclass tensors); their bytes are not counted, so the peak is a "
            "lower bound",
        )
        for operator, count in sorted(tracker.untracked.items())
    ]
    return MetricResult.partial(
        peak, unit="bytes", scope=scope, method="operator_dispatch"
    ), diagnostics


def _lazy_run(
    tracker: TrackedTensorMemory, lazy: Diagnostic, baseline: dict[str, int]
) -> MemoryRun:
    """The workload deferred its work: what ran is a lower bound, nothing ran is unavailable."""
    scope, method = "cpu_tracked_tensors", "operator_dispatch"
    peak = tracker.peak.get("cpu", 0)
    result = (
        MetricResult.partial(peak, unit="bytes", scope=scope, method=method)
        if peak > 0
        else MetricResult.unavailable(unit="bytes", scope=scope, method=method)
    )
    baseline["cpu_tracked_tensors_preexisting"] = tracker.preexisting.get("cpu", 0)
    section = MemorySection(results=[result], baseline_bytes=baseline)
    grad = (True in tracker.grad_modes) if tracker.grad_modes else None
    return MemoryRun(section=section, diagnostics=[lazy], calls=1, grad_enabled=grad)


def _collectives_note(count: int) -> Diagnostic:
    return Diagnostic(
        code="collective_scratch_unseen",
        severity="info",
        metric="memory.cpu_tracked_tensors",
        count=count,
        message=f"{count} collective operator(s) ran: the tensors they were given are counted, "
        "the scratch their backend allocates inside (gloo's flat copies, in its worker "
        "threads) is not, as for any kernel's scratch; on a CPU gloo run the allocator's peak "
        "can be higher by that scratch where a collective is in flight at the peak",
    )


def run_peak_memory(workload: Workload, device: torch.device) -> MemoryRun:
    """One call under the tracker (and CUDA peak statistics when ``device`` is CUDA)."""
    tracker = TrackedTensorMemory()
    diagnostics: list[Diagnostic] = []
    baseline: dict[str, int] = {}
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        baseline["accelerator_allocated"] = torch.cuda.memory_allocated(device)
        baseline["accelerator_reserved"] = torch.cuda.memory_reserved(device)
    with eager_compiled_code("the memory pass") as compiled, tracker:
        output = workload()
    diagnostics += compiled  # compiled code ran eagerly: its eager tensors were tracked
    lazy = lazy_output_diagnostic(output, "memory")
    del output
    if cuda:
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()

    if lazy is not None:
        return _lazy_run(tracker, lazy, baseline)
    tally = tracker.tally
    empty = empty_work_diagnostic(tally.operators, tally.elements_out, "memory")
    if empty is not None:
        diagnostics.append(empty)
    results: list[MetricResult] = []
    cpu, cpu_diagnostics = _tracked_result(tracker, "cpu", "cpu_tracked_tensors")
    unseen = no_operators_diagnostic(
        tally.operators, "memory", "the tracked-tensor peak is not a measured 0 bytes"
    )
    if unseen is not None:  # no operator dispatched: the tracker saw nothing, proves nothing
        diagnostics.append(unseen)
        cpu = MetricResult.unavailable(unit=cpu.unit, scope=cpu.scope, method=cpu.method)
    results.append(cpu)
    diagnostics += cpu_diagnostics
    if tracker.collectives:
        diagnostics.append(_collectives_note(tracker.collectives))
    baseline["cpu_tracked_tensors_preexisting"] = tracker.preexisting.get("cpu", 0)
    if cuda:
        results.append(
            MetricResult.complete(
                torch.cuda.max_memory_allocated(device),
                unit="bytes",
                scope="accelerator_allocated",
                method="allocator_stats",
            )
        )
        results.append(
            MetricResult.complete(
                torch.cuda.max_memory_reserved(device),
                unit="bytes",
                scope="accelerator_reserved",
                method="allocator_stats",
            )
        )
    elif device.type == "mps":
        mps, mps_diagnostics = _tracked_result(tracker, "mps", "mps_tracked_tensors")
        results.append(mps)
        diagnostics += mps_diagnostics
        baseline["mps_tracked_tensors_preexisting"] = tracker.preexisting.get("mps", 0)
        results.append(
            MetricResult.unavailable(
                unit="bytes", scope="accelerator_allocated", method="allocator_stats"
            )
        )
        diagnostics.append(
            Diagnostic(
                code="allocator_peak_unavailable",
                severity="info",
                metric="memory.accelerator_allocated",
                message="torch.mps exposes no peak-allocation statistic; only the dispatch-"
                "tracked MPS tensor peak (scope mps_tracked_tensors) was measured",
            )
        )
    section = MemorySection(results=results, baseline_bytes=baseline)
    grad = (True in tracker.grad_modes) if tracker.grad_modes else None
    return MemoryRun(section=section, diagnostics=diagnostics, calls=1, grad_enabled=grad)


def measure_peak_memory(
    workload: Workload, *, device: str | torch.device | None = None, name: str | None = None
) -> BenchmarkReport:
    """Peak PyTorch memory of one ``workload()`` call, one MetricResult per scope.

    Always reports ``cpu_tracked_tensors``; with ``device="cuda"`` also the allocator's
    ``accelerator_allocated`` and ``accelerator_reserved`` peaks. The scopes overlap in
    nothing and are never added.
    """
    check_workload(workload)
    resolved = resolve_device(device)
    run = run_peak_memory(workload, resolved)
    return BenchmarkReport(
        provenance=build_provenance(),
        name=name,
        execution=execution_record(
            resolved, {"memory": run.calls}, workload_grad_enabled=run.grad_enabled
        ),
        memory=run.section,
        diagnostics=run.diagnostics,
    )
