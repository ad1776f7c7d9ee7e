"""predict_peak_memory: run a workload once on fake tensors and predict its peak memory.

The workload contract: a zero-argument callable that *builds what it needs and runs one
step* — model, optimizer, inputs, forward, backward, optimizer step. It is called inside
``FakeTensorMode``, so every tensor it creates is a fake tensor: shapes, dtypes and devices
without data, on the CPU, whatever its size. Nothing is allocated and no accelerator is
needed. See docs/prediction.md.
"""

from __future__ import annotations

import copy
import dataclasses
import warnings
from collections.abc import Callable
from typing import Any

from torch._subclasses.fake_tensor import FakeTensorMode

from ..report import Diagnostic, PredictionReport
from ..workloads import eager_compiled_code, lazy_output_diagnostic
from .allocator import AllocatorModel, allocator_model
from .assemble import build_report, check_capacity, check_name
from .compiled import compiled_in
from .cuda_semantics import following_cuda
from .fidelity import real_run_semantics
from .modules import QualifiedModuleStack
from .offload import HostMemory
from .ownership import Ownership
from .parallelism import unmodelled
from .preserve import UserObjects
from .resident import Residents, TorchGlobals, reach
from .routing import ROUTING, WorstCaseRouting, worst_case_report
from .steady import second_call
from .stops import FAKE_LIMITS, FakeRunStopped, stop_diagnostic, user_line
from .tracker import PeakSnapshot, PeakTracker
from .values import KnownValues

_NO_DATA = "The tensor has a non-zero number of elements, but its data is not allocated yet"


def _unseen_operator(error: Exception) -> str:
    func = getattr(error, "func", None)
    return str(func) if func is not None else type(error).__name__


def _compiled_as_eager(note: Diagnostic) -> Diagnostic:
    """The counting passes' note, as a warning on the peak: an inductor graph can fuse away
    intermediates the eager run allocates, so the compiled step's real peak may be lower."""
    return note.model_copy(
        update={
            "severity": "warning",
            "metric": "peak",
            "message": note.message + "; for memory this predicts the eager step: an inductor "
            "graph may fuse away intermediates, so the compiled step's real peak can be lower",
        }
    )


def _run(
    workload: Callable[[], Any],
    allocator: AllocatorModel,
    *,
    tracker_type: type[PeakTracker] = PeakTracker,
    ownership_type: type[Ownership] = Ownership,
    routing: WorstCaseRouting | None = None,
) -> tuple[PeakTracker, PeakSnapshot, list[Diagnostic]]:
    """Run ``workload`` once under fake tensors; ``tracker_type``/``ownership_type`` let the
    sharded prediction (predict/sharded.py) follow collectives and DTensor shards. The
    resident tensors' fake copies are ``tracker.residents``."""
    diagnostics: list[Diagnostic] = []
    modules = QualifiedModuleStack()
    ownership = ownership_type()
    fake = FakeTensorMode(allow_non_fake_inputs=True)
    residents = Residents(fake, allocator)
    tracker = tracker_type(allocator, ownership, modules, modules._name, residents)
    tracker.routing = routing
    tracker.values = KnownValues(fake)

    def settle(optimizer: Any) -> None:
        readded = tracker.settle_host_counters(ownership.host_only(tracker.host_counters))
        if readded:
            diagnostics.append(
                Diagnostic(
                    code="host_counter_misjudged",
                    metric="peak",
                    message=f"{len(readded)} scalar tensor(s) made in an optimizer step were "
                    "first taken for host-side step counters; the peak may be low by up to "
                    f"{sum(readded)} bytes",
                )
            )

    def ended(optimizer: Any) -> None:
        settle(optimizer)
        if ownership.in_step == 0:
            tracker.steady.ended(optimizer, tracker.current)

    def began(optimizer: Any) -> None:
        if allocator.device_type == "cuda":
            _follow_cuda_defaults(optimizer, tracker.assumptions)
        tracker.steady.began(optimizer, tracker.current, tracker.peak)

    ownership.on_step_begin = began
    ownership.on_step_end = ended
    ownership.name_of = modules._name
    saved, user = TorchGlobals.capture(), UserObjects.capture(workload)
    try:
        compiled = _swap_with_values(residents, workload, tracker.values)
        # the module stack's hooks first, so a module is named before ownership labels it
        cuda = allocator.device_type == "cuda"
        with (
            eager_compiled_code("the prediction") as notes,
            modules,
            ownership,
            following_cuda(modules, cuda) as semantics,
            real_run_semantics(tracker.values, modules, cuda, compiled) as fidelity,
        ):
            output = _call(workload, fake, tracker, diagnostics)
            lazy = lazy_output_diagnostic(output, "peak")
            del output
            if lazy is not None:
                diagnostics.append(lazy)
            snapshot = tracker.finish()
            if (tracker.steady.twice or residents.grew_gradients()) and not _stopped(
                diagnostics
            ):  # built outside, state or gradients left for the next call: call again
                first = _counts(semantics)  # the report's notes describe the first call
                second_call(tracker, lambda found: _call(workload, fake, tracker, found))
                _put_back_counts(semantics, first)
        diagnostics += [_compiled_as_eager(n) for n in notes if not fidelity.compiled]
        diagnostics += residents.notes()
        diagnostics += fidelity.diagnostics()
        tracker.host_memory = fidelity.host
        tracker.assumptions += fidelity.assumptions()
        if semantics is not None:
            diagnostics += semantics.diagnostics()
            tracker.assumptions += semantics.assumptions()
    finally:
        residents.restore()
        user.restore()
        saved.restore()
    diagnostics += user.notes()
    return tracker, snapshot, diagnostics


def _counts(semantics: Any) -> dict[str, Any]:
    """The CUDA-semantics record's counters (every field but the module stack), copied."""
    if semantics is None:
        return {}
    return {
        f.name: copy.deepcopy(getattr(semantics, f.name))
        for f in dataclasses.fields(semantics)
        if f.name != "modules"
    }


def _put_back_counts(semantics: Any, counts: dict[str, Any]) -> None:
    for name, value in counts.items():
        setattr(semantics, name, value)


def _stopped(diagnostics: list[Diagnostic]) -> bool:
    return any(d.severity == "error" for d in diagnostics)


def _swap_with_values(
    residents: Residents, workload: Callable[[], Any], values: KnownValues
) -> list[str]:
    """Swap what the workload reaches for fake copies; the small ones keep their values
    (token ids, attention masks, position buffers: what data-dependent branches read).
    Returns the compiled code it reaches (compiled.py)."""
    reached = reach(workload)
    compiled = compiled_in(workload, reached)
    buffers = [b for module in reached.modules for b in module.buffers()]
    residents.swap(reached)
    for real in [*reached.tensors, *buffers]:
        values.learn(residents.fake_of(real), real)
    return compiled


def _follow_cuda_defaults(optimizer: Any, assumptions: list[str]) -> None:
    """On CUDA, torch's optimizers default to the ``foreach`` path (all parameters' temporaries
    at once); on CPU fakes they would take the per-tensor one. Only groups left to the default
    (``foreach=None``, not fused) are set, on the step's own (or fake-copied) group dicts."""
    for group in optimizer.param_groups:
        if "foreach" in group and group["foreach"] is None and not group.get("fused"):
            group["foreach"] = True
            note = (
                f"{type(optimizer).__name__}: foreach=True, CUDA's default for an optimizer "
                "left to choose (the CPU's default is the per-tensor path)"
            )
            if note not in assumptions:
                assumptions.append(note)


def _call(
    workload: Callable[[], Any], fake: FakeTensorMode, tracker: PeakTracker, found: list[Diagnostic]
) -> Any:
    """``workload()`` under the fake mode and the tracker; a fake-tensor limit is a diagnostic."""
    try:
        with fake, tracker, warnings.catch_warnings():
            # copy.deepcopy of a fake parameter (nn.TransformerEncoder clones its layer)
            # reads data_ptr(); torch warns, and nothing here depends on that pointer
            warnings.filterwarnings(
                "ignore", message="Accessing the data pointer of FakeTensor", category=UserWarning
            )
            # the prediction's own global module hooks, not the user's, make torch warn here
            warnings.filterwarnings(
                "ignore", message="Using `torch.compile\\(module\\)` when there are global hooks"
            )
            return workload()
    except FakeRunStopped as stop:
        found.append(stop_diagnostic(stop))
    except FAKE_LIMITS as error:  # raised outside any operator (e.g. by a fake tensor method)
        found.append(stop_diagnostic(FakeRunStopped(_unseen_operator(error), None, None, error)))
    except RuntimeError as error:
        if _NO_DATA in str(error):  # C++ read a fake tensor's data directly (no operator)
            read = FakeRunStopped("a direct data read", None, user_line(), error)
            found.append(stop_diagnostic(read))
            return None
        if "_apply(): Couldn't swap" not in str(error):
            raise
        raise RuntimeError(
            f"predict_peak_memory: the workload converted a module built on fake tensors "
            f"({error}); torch swaps fake parameters on .to()/.cuda()/.half() and refuses "
            "here. Build the model in its final dtype and device instead, inside the "
            "workload: nn.Linear(..., dtype=torch.bfloat16, device=...), or "
            "`with torch.device('cuda'):` and torch.set_default_dtype(...) around the "
            "constructor"
        ) from error
    return None


def predict_peak_memory(
    workload: Callable[[], Any],
    *,
    device: str = "cuda",
    capacity_bytes: int | None = None,
    name: str | None = None,
    routing: str = "exact",
) -> PredictionReport:
    """Predict the peak memory of one ``workload()`` call without running it on data.

    ``workload`` builds its model, optimizer and inputs and runs one step; it is called once
    inside ``FakeTensorMode`` (on the CPU: nothing is allocated, no accelerator is needed).
    ``device`` picks the allocator model: ``"cuda"`` predicts
    ``torch.cuda.max_memory_allocated`` (512-byte blocks), ``"cpu"`` predicts
    ``measure_peak_memory``'s ``cpu_tracked_tensors``. ``capacity_bytes`` (the owner's
    memory) sets ``fits``; it is ``None`` when a lower bound cannot decide.
    ``routing="worst_case"`` takes data-dependent sizes (an eager MoE's ``nonzero``) at the
    bound their shapes give, under its own method (predict/routing.py).
    """
    if not callable(workload):
        raise TypeError(f"workload must be a zero-argument callable, got {type(workload).__name__}")
    check_capacity(capacity_bytes)
    check_name(name)
    if routing not in ROUTING:
        raise ValueError(f"routing must be one of {ROUTING}, got {routing!r}")
    allocator = allocator_model(str(device))
    bounds = WorstCaseRouting() if routing == "worst_case" else None
    tracker, snapshot, diagnostics = _run(workload, allocator, routing=bounds)
    diagnostics += unmodelled(
        tracker.ownership.parallel, predictor="predict_peak_memory (one device)"
    )
    assert tracker.residents is not None
    report = build_report(
        tracker, snapshot, diagnostics, tracker.residents, allocator, str(device),
        capacity_bytes, name,
    )  # fmt: skip
    report = _with_host_memory(report, tracker.host_memory)
    return report if bounds is None else worst_case_report(report, bounds)


def _with_host_memory(report: PredictionReport, host: HostMemory | None) -> PredictionReport:
    """save_on_cpu under a CUDA prediction: the saved tensors' host bytes, beside the peak."""
    if host is None or not host.packed:
        return report
    result = report.peak.model_copy(
        update={"value": host.peak, "known_value": host.peak, "scope": "predicted_host_memory"}
    )
    if report.peak.status != "complete":  # a stopped run saw part of what it would offload
        result = result.model_copy(update={"value": None})
    note = Diagnostic(
        code="saved_tensors_on_host",
        severity="info",
        metric="host_bytes",
        count=host.packed,
        message=f"save_on_cpu moved {host.packed} saved tensor(s) to host memory, "
        f"{host.peak:,} bytes at most at once: they are host_bytes, not in the device "
        "peak; backward copies each back to the device when it needs it (counted)",
    )
    return report.model_copy(
        update={"host_bytes": result, "diagnostics": [*report.diagnostics, note]}
    )
