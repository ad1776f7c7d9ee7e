"""Worst-case routing: data-dependent sizes replaced by the bound their shapes give.

``predict_peak_memory(..., routing="worst_case")``. An eager Mixture-of-Experts loop picks
each expert's tokens with ``nonzero`` / ``torch.where(mask)`` / a boolean index: how many
rows depends on the router's values, which fake tensors do not have, so the exact
prediction stops there (partial). The shapes still bound it: ``nonzero`` of a mask of N
elements returns at most N rows, a boolean index or ``masked_select`` at most N elements
(top-k experts: at most tokens x k rows). This mode makes each such output its bound and
runs on. The operators run are the same whatever the routing and every size grows with
those rows, so the peak found bounds the real one from above; it is labelled with its own
method (:data:`WORST_CASE_METHOD`), never the exact prediction's. A computed value read in
Python (``.item()``, ``.tolist()``) still stops the run: no shape bounds it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch._subclasses.fake_tensor import DynamicOutputShapeException

from ..report import Diagnostic, MetricResult, PredictionReport

WORST_CASE_METHOD = "fake_tensor_worst_case_routing"
ROUTING = ("exact", "worst_case")
_aten = torch.ops.aten


def _nonzero(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.Tensor:
    mask = args[0]
    return torch.empty((mask.numel(), mask.dim()), dtype=torch.long, device=mask.device)


def _masked_select(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.Tensor:
    source, mask = args[0], args[1]
    count = torch.broadcast_shapes(source.shape, mask.shape).numel()
    return torch.empty((count,), dtype=source.dtype, device=source.device)


def _index(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """A boolean mask index as the long indices of all its elements: the same result shape
    as a mask of all True."""
    source, indices = args[0], list(args[1])
    bounded: list[Any] = []
    for index in indices:
        if isinstance(index, torch.Tensor) and index.dtype in (torch.bool, torch.uint8):
            rows = torch.empty((index.numel(),), dtype=torch.long, device=index.device)
            bounded += [rows] * index.dim()
        else:
            bounded.append(index)
    return func(source, bounded, *args[2:], **kwargs)


BOUNDS: dict[Any, Callable[[Any, tuple[Any, ...], dict[str, Any]], Any]] = {
    _aten.nonzero.default: _nonzero,
    _aten.masked_select.default: _masked_select,
    _aten.index.Tensor: _index,
}


class WorstCaseRouting:
    """The bound outputs a worst-case run made, by operator."""

    def __init__(self) -> None:
        self.bounded: dict[str, int] = {}

    def output(self, func: Any, args: Any, kwargs: Any, error: Exception) -> Any | None:
        """The bound-shaped output of a data-dependent operator, or None (no bound known)."""
        bound = BOUNDS.get(func)
        if bound is None or not isinstance(error, DynamicOutputShapeException):
            return None
        out = bound(func, tuple(args), dict(kwargs))
        self.bounded[str(func)] = self.bounded.get(str(func), 0) + 1
        return out


def _relabel(result: MetricResult | None) -> MetricResult | None:
    return None if result is None else result.model_copy(update={"method": WORST_CASE_METHOD})


def worst_case_report(report: PredictionReport, routing: WorstCaseRouting) -> PredictionReport:
    """Every figure of ``report`` under the worst-case method, and a diagnostic saying what
    was bounded (nothing bounded: the routing had fixed shapes, and the bound is exact)."""
    update: dict[str, Any] = {"diagnostics": [*report.diagnostics, _diagnostic(routing)]}
    for name in ("peak", "preexisting_bytes", "resident_bytes"):
        update[name] = _relabel(getattr(report, name))
    for name in ("first_step_peak", "steady_state_peak"):
        update[name] = _relabel(getattr(report, name))
    for name in ("by_category", "by_module", "by_phase", "resident_by_category"):
        update[name] = {key: _relabel(value) for key, value in getattr(report, name).items()}
    return report.model_copy(update=update)


def _diagnostic(routing: WorstCaseRouting) -> Diagnostic:
    if not routing.bounded:
        message = (
            "routing='worst_case': no data-dependent size was met, so the worst case is the "
            "exact prediction (the same figures under the worst-case method)"
        )
    else:
        calls = ", ".join(f"{op} x{count}" for op, count in sorted(routing.bounded.items()))
        message = (
            f"routing='worst_case': data-dependent sizes taken at their shape bound ({calls}: "
            "every mask element selected); the figures bound the real step from above, for "
            "any routing, and are not the peak of a particular batch"
        )
    return Diagnostic(
        code="worst_case_routing",
        severity="info",
        metric="peak",
        count=sum(routing.bounded.values()),
        message=message,
    )
