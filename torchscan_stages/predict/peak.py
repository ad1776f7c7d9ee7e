"""predict_peak_memory: run a workload once on fake tensors and predict its peak memory.

The workload contract: a zero-argument callable that *builds what it needs and runs one
step* — model, optimizer, inputs, forward, backward, optimizer step. It is called inside
``FakeTensorMode``, so every tensor it creates is a fake tensor: shapes, dtypes and devices
without data, on the CPU, whatever its size. Nothing is allocated and no accelerator is
needed. See docs/prediction.md.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    FakeTensorMode,
    UnsupportedOperatorException,
)

from ..provenance import build_provenance
from ..report import Diagnostic, MetricResult, PredictionReport
from .allocator import AllocatorModel, allocator_model
from .modules import QualifiedModuleStack
from .ownership import CATEGORIES, Ownership
from .parallelism import UNMODELLED, unmodelled
from .tracker import PeakSnapshot, PeakTracker

METHOD = "fake_tensor_prediction"
PHASES = ("outside", "forward", "backward", "optimizer_step")
_FAKE_LIMITS = (
    UnsupportedOperatorException,
    DynamicOutputShapeException,
    DataDependentOutputException,
)


def _unseen_operator(error: Exception) -> str:
    func = getattr(error, "func", None)
    return str(func) if func is not None else type(error).__name__


def _run(
    workload: Callable[[], Any],
    allocator: AllocatorModel,
    *,
    tracker_type: type[PeakTracker] = PeakTracker,
    ownership_type: type[Ownership] = Ownership,
) -> tuple[PeakTracker, PeakSnapshot, list[Diagnostic]]:
    """Run ``workload`` once under fake tensors; ``tracker_type``/``ownership_type`` let the
    sharded prediction (predict/sharded.py) follow collectives and DTensor shards."""
    diagnostics: list[Diagnostic] = []
    modules = QualifiedModuleStack()
    ownership = ownership_type()
    tracker = tracker_type(allocator, ownership, modules, modules._name)
    fake = FakeTensorMode(allow_non_fake_inputs=True)

    def settle() -> None:
        owned = ownership.snapshot(host_step_counters=tracker.host_counters)
        readded = tracker.settle_host_counters(owned)
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

    ownership.on_step_end = settle
    ownership.name_of = modules._name
    # the module stack's hooks first, so a module is named before ownership labels it
    with modules, ownership:
        try:
            with fake, tracker, warnings.catch_warnings():
                # copy.deepcopy of a fake parameter (nn.TransformerEncoder clones its layer)
                # reads data_ptr(); torch warns, and nothing here depends on that pointer
                warnings.filterwarnings(
                    "ignore",
                    message="Accessing the data pointer of FakeTensor",
                    category=UserWarning,
                )
                workload()
        except _FAKE_LIMITS as error:
            operator = _unseen_operator(error)
            diagnostics.append(
                Diagnostic(
                    code="fake_unsupported_operator",
                    severity="error",
                    metric="peak",
                    operator=operator,
                    message=f"{operator} cannot run on fake tensors ({type(error).__name__}: "
                    f"{error}); the workload stopped there, so every figure is a lower bound "
                    "covering the work before it",
                )
            )
        except RuntimeError as error:
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
        snapshot = tracker.finish()
    return tracker, snapshot, diagnostics


def _result(value: int, scope: str, complete: bool) -> MetricResult:
    if complete:
        return MetricResult.complete(value, unit="bytes", scope=scope, method=METHOD)
    return MetricResult.partial(value, unit="bytes", scope=scope, method=METHOD)


def _diagnostics_of(tracker: PeakTracker, allocator: AllocatorModel) -> list[Diagnostic]:
    found: list[Diagnostic] = [
        Diagnostic(
            code="untracked_tensor",
            metric="peak",
            operator=operator,
            count=count,
            message=f"{count} output tensor(s) of {operator} have no readable storage; their "
            "bytes are not counted, so the peak is a lower bound",
        )
        for operator, count in sorted(tracker.untracked.items())
    ]
    if tracker.preexisting:
        found.append(
            Diagnostic(
                code="preexisting_tensors",
                severity="info",
                metric="preexisting_bytes",
                message=f"the workload read {tracker.preexisting:,} bytes of tensors it did not "
                "create (built outside the prediction); they are not in the peak: build the "
                "model and inputs inside the workload to count them",
            )
        )
    if tracker.snapshot.master_bytes:
        found.append(
            Diagnostic(
                code="master_weights",
                severity="info",
                metric="optimizer_state",
                message=f"{tracker.snapshot.master_bytes:,} bytes at the peak are tensors the "
                "optimizer updates that no module owns (master copies of the weights); they "
                "are counted as optimizer_state and their .grad as gradients",
            )
        )
    if allocator.device_type == "cuda" and not tracker.device_only:
        found.append(
            Diagnostic(
                code="modelled_on_cpu_kernels",
                severity="info",
                metric="peak",
                message="predicted on fake tensors with the CPU's operator decompositions and "
                "autocast lists; CUDA-only kernel choices (fused attention, cuDNN) and kernel "
                "workspaces (cuBLAS, cuDNN) are not modelled",
            )
        )
    return found


def predict_peak_memory(
    workload: Callable[[], Any],
    *,
    device: str = "cuda",
    capacity_bytes: int | None = None,
    name: str | None = None,
) -> PredictionReport:
    """Predict the peak memory of one ``workload()`` call without running it on data.

    ``workload`` builds its model, optimizer and inputs and runs one step; it is called once
    inside ``FakeTensorMode`` (on the CPU: nothing is allocated, no accelerator is needed).
    ``device`` picks the allocator model: ``"cuda"`` predicts
    ``torch.cuda.max_memory_allocated`` (512-byte blocks), ``"cpu"`` predicts
    ``measure_peak_memory``'s ``cpu_tracked_tensors``. ``capacity_bytes`` (the owner's
    memory) sets ``fits``; it is ``None`` when a lower bound cannot decide.
    """
    if not callable(workload):
        raise TypeError(f"workload must be a zero-argument callable, got {type(workload).__name__}")
    if capacity_bytes is not None and (
        not isinstance(capacity_bytes, int)
        or isinstance(capacity_bytes, bool)
        or capacity_bytes <= 0
    ):
        raise ValueError(f"capacity_bytes must be a positive int of bytes, got {capacity_bytes!r}")
    allocator = allocator_model(str(device))
    tracker, snapshot, diagnostics = _run(workload, allocator)
    diagnostics += _diagnostics_of(tracker, allocator)
    diagnostics += unmodelled(
        tracker.ownership.parallel, predictor="predict_peak_memory (one device)"
    )
    complete = not any(
        d.severity == "error" or d.code in ("untracked_tensor", UNMODELLED) for d in diagnostics
    )
    scope = allocator.scope
    if tracker.peak == 0 and not complete:
        peak = MetricResult.unavailable(unit="bytes", scope=scope, method=METHOD)
    else:
        peak = _result(tracker.peak, scope, complete)
    by_category = {
        category: _result(snapshot.by_category.get(category, 0), scope, complete)
        for category in CATEGORIES
    }
    ranked = sorted(snapshot.by_module.items(), key=lambda item: (-item[1], item[0]))
    by_module = {module: _result(value, scope, complete) for module, value in ranked}
    by_phase = {
        phase: _result(tracker.phase_peaks[phase], scope, complete)
        for phase in PHASES
        if phase in tracker.phase_peaks
    }
    return PredictionReport(
        provenance=build_provenance(),
        name=name,
        device=str(device),
        allocator=allocator.description,
        rounding_bytes=allocator.rounding_bytes,
        peak=peak,
        by_category=by_category,
        by_module=by_module,
        by_phase=by_phase,
        phase_at_peak=snapshot.phase,
        module_at_peak=snapshot.module,
        preexisting_bytes=MetricResult.complete(
            tracker.preexisting, unit="bytes", scope="preexisting_tensors", method=METHOD
        ),
        capacity_bytes=capacity_bytes,
        fits=_fits(peak, capacity_bytes),
        diagnostics=diagnostics,
    )


def _fits(peak: MetricResult, capacity: int | None) -> bool | None:
    """Complete: peak <= capacity. A lower bound decides only when it already exceeds it."""
    if capacity is None or peak.known_value is None:
        return None
    if peak.status == "complete":
        return peak.known_value <= capacity
    return False if peak.known_value > capacity else None
