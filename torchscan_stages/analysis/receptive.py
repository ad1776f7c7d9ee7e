"""The receptive-field chain of a crawl: torchscan's recurrence over calls in completion order.

``rf += stride*(k-1); padding += stride*p; stride *= s`` over the layers whose handler gave a
local (kernel, stride, padding); a layer without a spatial meaning ends the chain.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..report import Diagnostic, MetricResult
from .handlers import METHOD, METRIC_UNITS, SCOPE, complete_metric

Triple = tuple[MetricResult, MetricResult, MetricResult]


class _CallLike(Protocol):
    path: str
    parent: int | None
    children: list[int]
    inside_inclusive: bool
    module: Any


def _metric(name: str, value: Any) -> MetricResult:
    if value is None:
        return MetricResult.unavailable(unit=METRIC_UNITS[name], scope=SCOPE, method=METHOD)
    value = _tidy(value)
    if type(value) is int and value >= 0:
        return complete_metric(name, value)
    return MetricResult.complete(value, unit=METRIC_UNITS[name], scope=SCOPE, method=METHOD)


def _tidy(value: Any) -> int | float:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value  # type: ignore[no-any-return]


_NONE: Triple = (  # frozen results: one shared triple for every record off the chain
    _metric("receptive_field", None),
    _metric("effective_stride", None),
    _metric("effective_padding", None),
)


def completion_order(calls: list[Any]) -> list[int]:
    """Post-order over the call tree (a call completes after all of its children)."""
    order: list[int] = []
    roots = [i for i, c in enumerate(calls) if c.parent is None]
    stack: list[tuple[int, bool]] = [(r, False) for r in reversed(roots)]
    while stack:
        i, expanded = stack.pop()
        if expanded:
            order.append(i)
            continue
        stack.append((i, True))
        stack.extend((c, False) for c in reversed(calls[i].children))
    return order


def _stopped(call: _CallLike) -> Diagnostic:
    return Diagnostic(
        code="receptive_field_stopped",
        severity="info",
        path=call.path,
        metric="receptive_field",
        message=f"{type(call.module).__name__} at {call.path or '<root>'} has no "
        "spatial receptive field; it and later layers report it as unavailable",
    )


def receptive_chain(
    calls: list[Any],
    local: list[tuple[Any, Any, Any] | None],
    participates: list[bool],
    diagnostics: list[Diagnostic],
) -> list[Triple]:
    """Cumulative (rf, stride, padding) per record, following calls in completion order."""
    none = _NONE
    values = [none] * len(calls)
    rf: Any = 1
    stride: Any = 1
    pad: Any = 0
    broken = False
    last: tuple[Any, Any, Any] | None = None
    triple_now = none
    for i in completion_order(calls):
        call = calls[i]
        if call.inside_inclusive:
            continue
        if participates[i] and not broken:
            triple = local[i]
            if triple is None:
                broken = True
                diagnostics.append(_stopped(call))
            else:
                k, s, p = triple
                rf = rf + stride * (k - 1)
                pad = pad + stride * p
                stride = stride * s
        if not broken:
            if (rf, stride, pad) != last:  # the chain changes at few layers: share the triple
                last = (rf, stride, pad)
                triple_now = (
                    _metric("receptive_field", rf),
                    _metric("effective_stride", stride),
                    _metric("effective_padding", pad),
                )
            values[i] = triple_now
    return values
