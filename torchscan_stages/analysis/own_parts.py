"""Each call's own part: what its handler says, or what its own operators show.

A call with a handler takes the handler's metrics (a failure or an invalid result is a
``handler_failed`` diagnostic, never a number). One without takes its own operators' word:
an exact zero when its own forward only reshaped, DMAs of the data it moved, a fill from
its operator FLOPs on request (``fill_from_operators``), else unavailable with an
``unsupported_module`` diagnostic that names the fix.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from torch import nn

from ..report import Diagnostic, MetricResult
from .call_tree import Call
from .handlers import (
    FILL_METHOD,
    FORMULA_METRICS,
    METHOD,
    METRIC_UNITS,
    SCOPE,
    as_diagnostics,
    expectation,
    passed_over,
    to_metric,
)
from .layer_sums import COST_METRICS, complete, unavailable
from .operators import OperatorCounter, OwnerOps
from .own_macs import macs_free as _no_macs
from .own_macs import own_macs, products_known

_VIEW_LIKE_REASONS = ("view or metadata", "host synchronisation", "profiler annotation")
_RESULT_KEYS = frozenset({*FORMULA_METRICS, "diagnostics"})


@dataclass
class OwnParts:
    """Own parts of every call, with what the receptive-field chain needs."""

    metrics: list[dict[str, MetricResult]]
    rf_local: list[tuple[Any, Any, Any] | None]
    participates: list[bool]
    diagnostics: list[Diagnostic] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    filled: list[str] = field(default_factory=list)
    reported: set[tuple[str, str]] = field(default_factory=set)
    # handler results of only non-negative ints, by (keys, values, value types): repeated
    # blocks give equal results, whose metrics, missing metrics and rf triple are equal too
    memo: dict[tuple[Any, ...], tuple[dict[str, MetricResult], list[str], Any]] = field(
        default_factory=dict
    )

    def once(self, call: Call, what: str) -> bool:
        """True the first time ``what`` is reported for ``call.path``."""
        if (call.path, what) in self.reported:
            return False
        self.reported.add((call.path, what))
        return True


def handler_metrics(call: Call) -> tuple[dict[str, MetricResult], list[Diagnostic], bool]:
    """(metrics, diagnostics, failed) from the handler's raw result."""
    assert call.handler is not None
    label = call.handler.label
    where = call.path or "<root>"
    if call.error is not None:
        failed = Diagnostic(
            code="handler_failed",
            severity="error",
            path=call.path,
            message=f"handler {label} for {type(call.module).__name__} at {where}"
            f" (call {call.call_index}) raised {call.error}; it expects "
            f"{expectation(call.handler)}; its metrics are unavailable",
        )
        return {}, [failed], True
    result = call.result
    try:
        if type(result) is not dict and not isinstance(result, Mapping):  # dict: no ABC check
            raise TypeError(f"returned {type(result).__name__}, expected a mapping of metrics")
        unknown = () if _RESULT_KEYS.issuperset(result) else set(result) - _RESULT_KEYS
        if unknown:
            raise ValueError(
                f"returned unknown metric(s) {sorted(unknown)}; known: {list(FORMULA_METRICS)}"
            )
        metrics = {
            name: to_metric(name, result[name]) for name in FORMULA_METRICS if name in result
        }
        diagnostics = as_diagnostics(result.get("diagnostics"), call.path)
    except (TypeError, ValueError) as error:
        failed = Diagnostic(
            code="handler_failed",
            severity="error",
            path=call.path,
            message=f"handler {label} for {type(call.module).__name__} at {where} "
            f"(call {call.call_index}) returned an invalid result: {error}; it expects "
            f"{expectation(call.handler)}; its metrics are unavailable",
        )
        return {}, [failed], True
    return metrics, diagnostics, False


def _own_ops_state(ops: OwnerOps | None, counter: OperatorCounter) -> tuple[bool, bool, str]:
    """(does arithmetic, moves data, description) of a module's own operators."""
    if ops is None:
        return False, False, ""
    arithmetic = ops.flops > 0 or bool(ops.uncounted_calls)
    names = sorted([n for n, f in ops.op_flops.items() if f > 0] + list(ops.uncounted_calls))
    moves = [  # data movement whose elements are not counted (operator_formulas.MOVED)
        n
        for n, calls in ops.ignored_calls.items()
        if ops.moved_calls.get(n) != calls
        and not counter.ignored_reason(n).startswith(_VIEW_LIKE_REASONS)
    ]
    # counted at 0 FLOPs: a lookup or a non-accumulating scatter/index_put, which move data
    moves += [n for n, flops in ops.op_flops.items() if flops == 0]
    return arithmetic, bool(moves), ", ".join(names) if names else ", ".join(sorted(moves))


def _memo_key(call: Call) -> tuple[Any, ...] | None:
    """The memo key of a handler result made of ints only (None: not memoised)."""
    result = call.result
    if call.error is not None or type(result) is not dict or "diagnostics" in result:
        return None
    values = tuple(result.values())
    return (tuple(result), values, tuple(map(type, values)))


def _from_handler(own: OwnParts, i: int, call: Call) -> bool:
    """Own part from the call's handler; False when the handler failed."""
    assert call.handler is not None
    own.participates[i] = not call.inside_inclusive
    key = _memo_key(call)
    hit = own.memo.get(key) if key is not None else None
    if hit is not None:  # the same ints as an earlier call: the same metrics, shared
        metrics, missing, rf_local = hit
        own.metrics[i] = metrics
        own.rf_local[i] = rf_local
        if missing and own.once(call, "missing"):
            own.diagnostics.append(_missing(call, missing))
        return True
    metrics, diags, failed = handler_metrics(call)
    own.diagnostics.extend(diags)
    if failed:
        own.failures.append(f"layers[{call.path or '<root>'}#{call.call_index}]")
        own.metrics[i] = {m: unavailable(m) for m in COST_METRICS}
        return False
    own.metrics[i] = metrics
    missing = [m for m in COST_METRICS if m not in metrics or metrics[m].status == "unavailable"]
    if missing and own.once(call, "missing"):
        own.diagnostics.append(_missing(call, missing))
    rf = metrics.get("receptive_field")
    stride = metrics.get("effective_stride")
    pad = metrics.get("effective_padding")
    if (
        rf is not None
        and stride is not None
        and pad is not None
        and rf.status == stride.status == pad.status == "complete"
    ):
        own.rf_local[i] = (rf.value, stride.value, pad.value)
    if key is not None and not diags and all(t is int for t in key[2]):
        own.memo[key] = (metrics, missing, own.rf_local[i])
    return True


def _missing(call: Call, missing: list[str]) -> Diagnostic:
    assert call.handler is not None
    return Diagnostic(
        code="formula_unavailable",
        path=call.path,
        metric=",".join(missing),
        message=f"{call.handler.label} gives no {', '.join(missing)} for "
        f"{type(call.module).__name__} at {call.path or '<root>'}",
    )


def _filled(ops: OwnerOps) -> dict[str, MetricResult]:
    """Own module metrics read from the call's own operators (method ``operator_fill``)."""
    flops_status = "complete" if ops.complete else "partial"
    macs_status = "complete" if ops.complete and not ops.unclassified_calls else "partial"
    macs = ops.product_flops // 2
    return {
        "module_flops": _status_metric(flops_status, ops.flops, "FLOPs"),
        "macs": _status_metric(macs_status, macs, "MACs"),
        "dmas": MetricResult.unavailable(unit="elements", scope=SCOPE, method=FILL_METHOD),
    }


def _status_metric(status: str, value: int, unit: str) -> MetricResult:
    if status == "complete":
        return MetricResult.complete(value, unit=unit, scope=SCOPE, method=FILL_METHOD)
    return MetricResult.partial(value, unit=unit, scope=SCOPE, method=FILL_METHOD)


def _unsupported(own: OwnParts, i: int, call: Call, ops: OwnerOps | None, what: str) -> None:
    """A module without handler that computes itself: unavailable own part + a diagnostic."""
    own.metrics[i] = {m: unavailable(m) for m in COST_METRICS}
    macs_free = ops is not None and _no_macs(ops)
    products = ops is not None and not macs_free and products_known(ops)
    if macs_free:
        own.metrics[i]["macs"] = complete("macs", 0)
    elif products:  # structural: its MACs are the multiply-adds of the products it ran
        assert ops is not None
        own.metrics[i]["macs"] = _status_metric("complete", own_macs(ops), "MACs")
    own.participates[i] = not call.children and not call.inside_inclusive
    if not own.once(call, "unsupported"):
        return
    kind = "leaf module" if not call.children else "module"
    affected = (
        "its module FLOPs and DMAs are a lower bound or unavailable (its MACs are "
        "complete: those operators do no multiply-accumulate)"
        if macs_free
        else "its module FLOPs and DMAs are a lower bound or unavailable (its MACs are "
        "complete, method operator_fill: the multiply-adds of the tensor products its own "
        "operators ran; element-wise multiplies and adds count as FLOPs, not MACs)"
        if products
        else "its module metrics are a lower bound or unavailable"
    )
    name = type(call.module).__name__
    base = passed_over(type(call.module))  # a subclass that replaced a handled forward
    why = ""
    if base is not None:
        why = (
            f" (it replaces {base.__name__}.forward and runs other arithmetic than "
            f"{base.__name__}'s handler describes)"
        )
    own.diagnostics.append(
        Diagnostic(
            code="unsupported_module",
            path=call.path,
            metric="module_flops,dmas" if macs_free or products else "module_flops,macs,dmas",
            message=f"{kind} {name} at {call.path or '<root>'} has no handler"
            f"{why} and its own "
            f"forward computes outside its children ({what}); {affected}. Fix: "
            f"custom_modules={{{name}: ModuleHandler(...)}}, or fill_from_operators=[{name}] "
            "to take its own operator count.",
        )
    )


def _reshapes_only(
    own: OwnParts, i: int, call: Call, moves: bool, what: str, ops: OwnerOps | None
) -> None:
    """A module whose own forward only reshapes or moves data: exact zero FLOPs and MACs;
    DMAs the elements its counted data-movement operators moved (a lower bound when one
    moved data uncounted)."""
    own.metrics[i] = {"module_flops": complete("module_flops", 0), "macs": complete("macs", 0)}
    moved = ops.moved_elements if ops is not None else 0
    if not moves:
        own.metrics[i]["dmas"] = complete("dmas", moved)
        return
    own.metrics[i]["dmas"] = MetricResult.partial(
        moved, unit=METRIC_UNITS["dmas"], scope=SCOPE, method=METHOD
    )
    if own.once(call, "moves"):
        own.diagnostics.append(
            Diagnostic(
                code="unmodelled_data_movement",
                path=call.path,
                metric="dmas",
                message=f"{type(call.module).__name__} at {call.path or '<root>'} "
                f"copies data in its own forward ({what}); its DMAs are a lower bound",
            )
        )


def own_parts(
    calls: list[Call],
    counter: OperatorCounter | None,
    owner_ops: dict[Any, OwnerOps],
    fill: Any,
) -> OwnParts:
    """Own module-formula part of every call (full mode)."""
    n = len(calls)
    own = OwnParts([{} for _ in range(n)], [None] * n, [False] * n)
    for i, call in enumerate(calls):
        if call.handler is not None:
            _from_handler(own, i, call)
            continue
        ops = owner_ops.get(call.key)
        arithmetic, moves, what = _own_ops_state(ops, counter)  # type: ignore[arg-type]
        if arithmetic and ops is not None and _wants_fill(fill, call.module):
            own.metrics[i] = _filled(ops)
            own.participates[i] = not call.children and not call.inside_inclusive
            if call.path not in own.filled:
                own.filled.append(call.path)
        elif arithmetic:
            _unsupported(own, i, call, ops, what)
        else:
            _reshapes_only(own, i, call, moves, what, ops)
    return own


def _wants_fill(fill: Any, module: nn.Module) -> bool:
    if fill is True:
        return True
    return bool(fill) and isinstance(module, fill)
