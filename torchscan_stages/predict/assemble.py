"""The PredictionReport of one fake run: results, resident bytes, steady state, diagnostics."""

from __future__ import annotations

from typing import Any

from ..provenance import build_provenance
from ..report import Diagnostic, MetricResult, PredictionReport
from .allocator import AllocatorModel
from .ownership import CATEGORIES
from .parallelism import UNMODELLED
from .resident import RESIDENT_CATEGORIES, Residents
from .tracker import PeakSnapshot, PeakTracker

METHOD = "fake_tensor_prediction"
PHASES = ("outside", "forward", "backward", "optimizer_step")


def _result(value: int, scope: str, complete: bool) -> MetricResult:
    if complete:
        return MetricResult.complete(value, unit="bytes", scope=scope, method=METHOD)
    return MetricResult.partial(value, unit="bytes", scope=scope, method=METHOD)


def _work_diagnostics(tracker: PeakTracker) -> list[Diagnostic]:
    """A workload that ran no operator, or only on ``meta``, predicts nothing: an error."""
    if tracker.operators_seen == 0:
        return [
            Diagnostic(
                code="no_operators",
                severity="error",
                metric="peak",
                message="the workload ran no tensor operator, so there is no step to predict; "
                "a workload must run its work when called (not return a function, generator "
                "or coroutine that would run it later)",
            )
        ]
    if tracker.peak == 0 and tracker.meta_outputs:
        return [
            Diagnostic(
                code="ran_on_meta",
                severity="error",
                metric="peak",
                count=tracker.meta_outputs,
                message=f"all {tracker.meta_outputs} tensor(s) the workload made were on the "
                "'meta' device (torch.set_default_device('meta') or device='meta'?), which "
                "holds no memory; build the step for the device it will run on (the "
                "prediction needs no memory for it: it runs on fake tensors)",
            )
        ]
    return []


def diagnostics_of(tracker: PeakTracker, allocator: AllocatorModel) -> list[Diagnostic]:
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
    found += _work_diagnostics(tracker)
    found += [
        Diagnostic(
            code="fake_kernel_divergence",
            metric="peak",
            operator=operator,
            message=message,
        )
        for operator, message in sorted(tracker.divergent.items())
    ]
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
    if tracker.steady.extra_fresh_steps and tracker.steady.measured is None:
        found.append(
            Diagnostic(
                code="steady_state_one_optimizer",
                metric="steady_state_peak",
                count=tracker.steady.extra_fresh_steps,
                message="more than one fresh optimizer stepped; the steady-state peak adds the "
                "state of the first one only, so it is a lower bound",
            )
        )
    if allocator.device_type == "cuda" and not tracker.device_only:
        found.append(
            Diagnostic(
                code="modelled_on_cpu_kernels",
                severity="info",
                metric="peak",
                message="predicted on CPU fake tensors: kernel workspaces served by the same "
                "allocator (cuBLAS, cuDNN convolutions) are not modelled. Where CUDA's "
                "kernels keep other tensors than the CPU's, the prediction follows CUDA "
                "(scaled_dot_product_attention's backend, fused dropout) or says so on the "
                "peak (cuda_attention_*, cpu_autocast_lists, cuda_autocast_not_run, "
                "cuda_rnn_not_modelled)",
            )
        )
    return found


def _resident(
    tracker: PeakTracker, residents: Residents, found: list[Diagnostic]
) -> tuple[MetricResult, dict[str, MetricResult]]:
    parts = residents.by_category()
    parts["inputs"] += tracker.preexisting  # read but made outside the tracker (rare)
    total = sum(parts.values())
    scope = "predicted_resident_" + tracker.allocator.scope.removeprefix("predicted_")
    if total:
        found.append(
            Diagnostic(
                code="resident_tensors",
                severity="info",
                metric="resident_bytes",
                message=f"{total:,} bytes of tensors existed before the step (parameters, "
                "buffers, optimizer state or inputs built outside it); the step saw fake "
                "copies of them and left them unchanged. They are resident_bytes, beside the "
                "step's peak: the step needs resident_bytes + its peak",
            )
        )
    by_category = {
        name: MetricResult.complete(value, unit="bytes", scope=scope, method=METHOD)
        for name, value in parts.items()
    }
    return MetricResult.complete(total, unit="bytes", scope=scope, method=METHOD), by_category


def _steady(
    tracker: PeakTracker, peak: MetricResult, scope: str, complete: bool
) -> tuple[MetricResult | None, MetricResult | None, str]:
    """(first step, steady state, headline): steady state is the headline of a training step."""
    steady = tracker.steady
    value = steady.peak()
    if value is not None:
        measured = steady.measured is not None  # the second call saw every optimizer
        exact = measured or not (steady.extra_fresh_steps or steady.second_call_failed)
        return peak, _result(value, scope, complete and exact), "steady_state_peak"
    if steady.resident_state:  # the run is a steady-state step already
        first = MetricResult.unavailable(unit="bytes", scope=scope, method=METHOD)
        return first, peak, "steady_state_peak"
    return None, None, "peak"


def steady_diagnostics(tracker: PeakTracker) -> list[Diagnostic]:
    """How the steady-state peak was found, and what qualifies it."""
    steady = tracker.steady
    value = steady.peak()  # derives, which counts the open gradients
    found: list[Diagnostic] = []
    if steady.second_call_failed is not None:
        found.append(
            Diagnostic(
                code="steady_state_second_call_failed",
                metric="steady_state_peak",
                message="the step was called a second time on the same fake copies to measure "
                f"its steady state and failed ({steady.second_call_failed}); the "
                "steady-state peak is derived from the first call instead, a lower bound",
            )
        )
    if steady.open_gradients:
        found.append(
            Diagnostic(
                code="steady_state_kept_gradients_bound",
                metric="steady_state_peak",
                count=steady.open_gradients,
                message=f"{steady.open_gradients} gradient(s) kept between steps "
                "(zero_grad(set_to_none=False)) are accumulated without an autograd event "
                "(FSDP2's sharded gradients): the second step's incoming copies are counted "
                "until the optimizer step, so the steady-state peak may be high by up to "
                "their bytes; build the model outside the step to have it measured instead",
            )
        )
    if value is None:
        return found
    how = (
        "measured by calling the step a second time on the same fake copies (the model is "
        "built outside the step): it starts with everything the first call left alive"
        if steady.measured is not None
        else f"derived from the first step: {steady.kept_bytes:,} bytes it leaves alive for "
        "the next (optimizer state, gradients kept by zero_grad(set_to_none=False), state "
        "written after the optimizer step such as a GradScaler's) held from the start"
    )
    found.append(
        Diagnostic(
            code="steady_state_headline",
            severity="info",
            metric="steady_state_peak",
            message=f"the headline is the steady-state peak, {value:,} bytes, {how}; fits and "
            "max_batch_size judge resident_bytes + steady_state_peak",
        )
    )
    return found


# a diagnostic with one of these codes makes every figure of the run a lower bound
PARTIAL_CODES = frozenset(
    {
        "untracked_tensor",
        "fake_kernel_divergence",
        UNMODELLED,
        "branch_assumed",
        "compiled_as_eager",
    }
)


def is_complete(diagnostics: list[Diagnostic]) -> bool:
    """No error and nothing unseen or unmodelled: the figures are the step's own."""
    return not any(d.severity == "error" or d.code in PARTIAL_CODES for d in diagnostics)


def peak_result(tracker: PeakTracker, scope: str, complete: bool) -> MetricResult:
    """The run's peak; unavailable when nothing was counted and the run is not complete."""
    if tracker.peak == 0 and not complete:
        return MetricResult.unavailable(unit="bytes", scope=scope, method=METHOD)
    return _result(tracker.peak, scope, complete)


def breakdowns(
    tracker: PeakTracker,
    snapshot: PeakSnapshot,
    scope: str,
    complete: bool,
    categories: tuple[str, ...] = CATEGORIES,
) -> dict[str, Any]:
    """The report's splits of one run: by category (every one of ``categories``, zeros
    included), by module (largest first), each phase's own peak, and where the peak was.
    The single-device and the per-rank (FSDP2) reports are both built from it."""
    ranked = sorted(snapshot.by_module.items(), key=lambda item: (-item[1], item[0]))
    return {
        "by_category": {
            c: _result(snapshot.by_category.get(c, 0), scope, complete) for c in categories
        },
        "by_module": {module: _result(value, scope, complete) for module, value in ranked},
        "by_phase": {
            phase: _result(tracker.phase_peaks[phase], scope, complete)
            for phase in PHASES
            if phase in tracker.phase_peaks
        },
        "phase_at_peak": snapshot.phase,
        "module_at_peak": snapshot.module,
    }


def _figures(
    tracker: PeakTracker,
    snapshot: PeakSnapshot,
    diagnostics: list[Diagnostic],
    allocator: AllocatorModel,
    capacity_bytes: int | None,
    categories: tuple[str, ...],
) -> dict[str, Any]:
    """The fields every prediction report shares: peak, splits, resident bytes, first step
    and steady state, and the verdict on resident + headline."""
    diagnostics = diagnostics + steady_diagnostics(tracker)
    complete = is_complete(diagnostics)
    scope = allocator.scope
    peak = peak_result(tracker, scope, complete)
    assert tracker.residents is not None
    resident, resident_parts = _resident(tracker, tracker.residents, diagnostics)
    first, steady, headline = _steady(tracker, peak, scope, complete)
    headline_result = steady if headline == "steady_state_peak" and steady else peak
    return {
        "provenance": build_provenance(),
        "allocator": allocator.description,
        "rounding_bytes": allocator.rounding_bytes,
        "peak": peak,
        **breakdowns(tracker, snapshot, scope, complete, categories),
        "preexisting_bytes": resident,
        "resident_bytes": resident,
        "resident_by_category": resident_parts,
        "first_step_peak": first,
        "steady_state_peak": steady,
        "headline": headline,
        "assumptions": list(tracker.assumptions),
        "capacity_bytes": capacity_bytes,
        "fits": fits(headline_result, int(resident.known_value or 0), capacity_bytes),
        "diagnostics": diagnostics,
    }


def build_report(
    tracker: PeakTracker,
    snapshot: PeakSnapshot,
    diagnostics: list[Diagnostic],
    residents: Residents,
    allocator: AllocatorModel,
    device: str,
    capacity_bytes: int | None,
    name: str | None,
) -> PredictionReport:
    """Every figure of one fake run, with the diagnostics that qualify it."""
    assert tracker.residents is residents
    found = diagnostics + diagnostics_of(tracker, allocator)
    figures = _figures(tracker, snapshot, found, allocator, capacity_bytes, CATEGORIES)
    return PredictionReport(name=name, device=device, **figures)


def per_rank_report(
    tracker: PeakTracker,
    snapshot: PeakSnapshot,
    diagnostics: list[Diagnostic],
    allocator: AllocatorModel,
    *,
    scheme: tuple[str, tuple[str, ...], list[Diagnostic]],
    world: tuple[int, int],
    device: str,
    capacity_bytes: int | None,
    name: str | None,
) -> PredictionReport:
    """One rank's report of a parallel step (FSDP2, DDP): ``scheme`` is (its name, its
    categories, its own diagnostics), ``world`` is (world size, rank). Resident tensors,
    first step and steady state are counted as for one device, as this rank holds them."""
    sharding, categories, own = scheme
    found = diagnostics + diagnostics_of(tracker, allocator) + own
    figures = _figures(tracker, snapshot, found, allocator, capacity_bytes, categories)
    return PredictionReport(
        name=name,
        device=device,
        **figures,
        world_size=world[0],
        rank=world[1],
        sharding=sharding,
    )


def headline_result(report: PredictionReport) -> MetricResult:
    """The figure a report's ``fits`` judges (with its ``resident_bytes`` beside it): the
    steady-state peak of a training step, else the peak."""
    if report.headline == "steady_state_peak" and report.steady_state_peak is not None:
        return report.steady_state_peak
    return report.peak


def check_capacity(capacity_bytes: int | None) -> None:
    """``capacity_bytes`` is None or a positive int of bytes (a bool is refused)."""
    if capacity_bytes is not None and (
        not isinstance(capacity_bytes, int)
        or isinstance(capacity_bytes, bool)
        or capacity_bytes <= 0
    ):
        raise ValueError(f"capacity_bytes must be a positive int of bytes, got {capacity_bytes!r}")


def check_name(name: object) -> None:
    """``name`` is None or a str: refused before the (possibly long) fake run."""
    if name is not None and not isinstance(name, str):
        raise TypeError(f"name must be a str or None, got {type(name).__name__}")


def fits(peak: MetricResult, resident: int, capacity: int | None) -> bool | None:
    """Complete: resident + peak <= capacity. A lower bound decides only when it exceeds it."""
    if capacity is None or peak.known_value is None:
        return None
    need = resident + peak.known_value
    if peak.status == "complete":
        return need <= capacity
    return False if need > capacity else None


__all__ = [
    "METHOD",
    "PHASES",
    "RESIDENT_CATEGORIES",
    "_result",
    "breakdowns",
    "build_report",
    "check_capacity",
    "diagnostics_of",
    "fits",
    "headline_result",
    "is_complete",
    "peak_result",
    "per_rank_report",
]
