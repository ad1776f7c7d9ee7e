"""A crawl's model totals: parameter and buffer counts of every module, cost of the root call.

Shared by the hooked crawl and the parameters-only report (no input given). Parameters of a
lazy module not yet materialised (``nn.LazyLinear`` before its first forward, an
``nn.UninitializedParameter``) have no size: the counts then leave them out as a lower bound
(``partial``) and say which modules hold them, never a complete count that is short.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import nn
from torch.nn.parameter import is_lazy

from ..report import AnalysisTotals, Diagnostic, MetricResult
from ._walk import named_modules
from .call_values import tensor_sums
from .layer_records import Built
from .layer_sums import COST_METRICS, sum_metric, unavailable


def _count(value: int, unit: str, known: bool) -> MetricResult:
    if known:
        return MetricResult.complete(value, unit=unit, scope="model", method="parameter_count")
    return MetricResult.partial(value, unit=unit, scope="model", method="parameter_count")


def _holds_lazy(tensors: dict[str, Any]) -> bool:
    return any(is_lazy(t) for t in tensors.values() if t is not None)


def lazy_paths(module: nn.Module, modules: Sequence[nn.Module]) -> tuple[list[str], list[str]]:
    """Paths of modules holding unmaterialised (lazy) parameters, and buffers (the paths are
    looked up only when ``modules`` hold one: a plain model pays one pass over its tensors)."""
    if not any(_holds_lazy(m._parameters) or _holds_lazy(m._buffers) for m in modules):
        return [], []
    named = named_modules(module)
    params = [path for path, sub in named if _holds_lazy(sub._parameters)]
    buffers = [path for path, sub in named if _holds_lazy(sub._buffers)]
    return params, buffers


def lazy_diagnostic(params: list[str], buffers: list[str]) -> Diagnostic | None:
    if not params and not buffers:
        return None
    shown = ", ".join(p or "<root>" for p in (params + buffers)[:8])
    return Diagnostic(
        code="uninitialized_parameters",
        severity="warning",
        metric="parameters,trainable_parameters,frozen_parameters,parameter_bytes"
        + (",buffer_elements,buffer_bytes" if buffers else ""),
        message=f"lazy module(s) whose parameters or buffers are not materialised yet ({shown}): "
        "their sizes are unknown until a forward call, so the counts leave them out (a lower "
        "bound); give an input (input_shape or args) to materialise them",
    )


def model_totals(
    modules: list[nn.Module],
    built: Built,
    roots: list[int],
    operator_total: MetricResult,
    lazy: tuple[list[str], list[str]] = ([], []),
) -> AnalysisTotals:
    """Totals of the model: its tensors each counted once, the cost of its root call(s)."""
    total, trainable, pbytes, buffer_elements, bbytes, _sizes = tensor_sums(modules)
    cost = {}
    for name in COST_METRICS:
        cost[name] = sum_metric(name, [built.aggregates[i][name] for i in roots])
        if not roots:
            cost[name] = unavailable(name)
    known, buffers_known = not lazy[0], not lazy[1]
    return AnalysisTotals(
        parameters=_count(total, "parameters", known),
        trainable_parameters=_count(trainable, "parameters", known),
        frozen_parameters=_count(total - trainable, "parameters", known),
        parameter_bytes=_count(pbytes, "bytes", known),
        buffer_elements=_count(buffer_elements, "elements", buffers_known),
        buffer_bytes=_count(bbytes, "bytes", buffers_known),
        module_flops=cost["module_flops"],
        macs=cost["macs"],
        dmas=cost["dmas"],
        operator_flops=operator_total,
    )
