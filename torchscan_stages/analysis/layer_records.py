"""Layer records from the calls crawl_module recorded: own parts, aggregation, wire models.

Runs after the forward, so nothing here is on the hot path of the hooks. A record's own part
comes from its handler, or, without one, from the operators its own forward dispatched (an
exact zero when it only reshaped, unavailable when it computed); aggregates add children's
records; the receptive-field chain follows completion order. Per-layer operator FLOPs (the
``measure_flops`` method) travel beside the module-formula metrics and are never added to them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel
from torch import nn

from ..report import (
    Diagnostic,
    LayerMetrics,
    LayerOperatorFlops,
    LayerRecord,
    MetricResult,
    ParameterStats,
    ValueMeta,
    combine_sum,
    trusted_construct,
)
from .call_tree import call_depths
from .call_values import tensor_sums
from .handlers import (
    FILL_METHOD,
    FORMULA_METRICS,
    METHOD,
    METRIC_UNITS,
    MIXED_METHOD,
    SCOPE,
    ModuleHandler,
    as_diagnostics,
    complete_metric,
    expectation,
    passed_over,
    to_metric,
)
from .operators import OperatorCounter, OwnerOps
from .own_macs import macs_free as _no_macs
from .own_macs import own_macs, products_known
from .packed_params import holds_packed_weights, packed_tensors
from .parametrized import parametrization_lists
from .receptive import receptive_chain

Mode = Literal["full", "structure"]
COST_METRICS = ("module_flops", "macs", "dmas")
RF_METRICS = ("receptive_field", "effective_stride", "effective_padding")
_VIEW_LIKE_REASONS = ("view or metadata", "host synchronisation", "profiler annotation")
_RESULT_KEYS = frozenset({*FORMULA_METRICS, "diagnostics"})
OPERATOR_UNIT = "FLOPs"
OPERATOR_METHOD = "operator_dispatch"


@dataclass(slots=True)
class Call:
    """One module call, filled by the hooks (cheap fields only; slots: built once per call)."""

    module: nn.Module
    path: str
    call_index: int
    parent: int | None
    handler: ModuleHandler | None
    key: str
    inputs: ValueMeta  # shared instances (to_value_meta's cache): the raw tuples die at once
    output: ValueMeta | None = None
    result: Any = None
    error: str | None = None
    children: list[int] | tuple[()] = ()  # a list once the call has a child
    inside_inclusive: bool = False


@dataclass
class Built:
    records: list[LayerRecord]
    aggregates: list[dict[str, MetricResult]]
    diagnostics: list[Diagnostic]
    handler_failures: list[str]
    filled: list[str]


@dataclass
class _Own:
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


# --------------------------------------------------------------------------- metric helpers

_UNAVAILABLE = {
    name: MetricResult.unavailable(unit=unit, scope=SCOPE, method=METHOD)
    for name, unit in METRIC_UNITS.items()
}


def unavailable(name: str) -> MetricResult:
    return _UNAVAILABLE[name]  # frozen models: one shared instance is safe


def complete(name: str, value: int | float) -> MetricResult:
    if type(value) is int and value >= 0:
        return complete_metric(name, value)
    return MetricResult.complete(value, unit=METRIC_UNITS[name], scope=SCOPE, method=METHOD)


def _relabel(result: MetricResult, method: str) -> MetricResult:
    unit, scope = result.unit, result.scope
    if result.status == "complete":
        assert result.value is not None
        return MetricResult.complete(result.value, unit=unit, scope=scope, method=method)
    if result.status == "partial":
        assert result.known_value is not None
        return MetricResult.partial(result.known_value, unit=unit, scope=scope, method=method)
    return MetricResult.unavailable(unit=unit, scope=scope, method=method)


def sum_metric(name: str, parts: list[MetricResult]) -> MetricResult:
    """Sum of module-formula parts; any operator-filled part makes the method say so."""
    if len(parts) == 1 and parts[0].unit == METRIC_UNITS[name]:  # a leaf: nothing to add
        return parts[0]
    unit, total = METRIC_UNITS[name], 0
    for part in parts:  # the common case: complete int module-formula parts, added here
        value = part.value
        if (
            type(value) is not int
            or part.status != "complete"
            or part.method != METHOD
            or part.unit != unit
            or part.scope != SCOPE
        ):
            break
        total += value
    else:
        return complete_metric(name, total)
    method = METHOD
    if any(p.method != METHOD for p in parts):
        method = MIXED_METHOD
        parts = [_relabel(p, MIXED_METHOD) for p in parts]
    return combine_sum(parts, unit=METRIC_UNITS[name], scope=SCOPE, method=method)


# ------------------------------------------------------------------------------ own parts


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


def _from_handler(own: _Own, i: int, call: Call) -> bool:
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


def _unsupported(own: _Own, i: int, call: Call, ops: OwnerOps | None, what: str) -> None:
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
    own: _Own, i: int, call: Call, moves: bool, what: str, ops: OwnerOps | None
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


def _own_parts(
    calls: list[Call],
    counter: OperatorCounter | None,
    owner_ops: dict[Any, OwnerOps],
    fill: Any,
) -> _Own:
    """Own module-formula part of every call (full mode)."""
    n = len(calls)
    own = _Own([{} for _ in range(n)], [None] * n, [False] * n)
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


# ------------------------------------------------------------------------------ aggregates


def _aggregate(calls: list[Call], own: list[dict[str, MetricResult]]) -> list[dict[str, Any]]:
    """Whole-call metrics; children have larger indices than their parent: one reverse pass.

    A leaf whose own part has all three cost metrics keeps that dict as its aggregate (it may
    also hold the local receptive-field entries: aggregates are read by name, never listed).
    """
    n = len(calls)
    aggregates: list[dict[str, MetricResult]] = list(own)
    for i in range(n - 1, -1, -1):
        call = calls[i]
        mine_all = own[i]
        if not call.children:  # a leaf: its own part is its whole call
            if "module_flops" in mine_all and "macs" in mine_all and "dmas" in mine_all:
                continue  # its own dict itself (read only, like every aggregate)
            aggregates[i] = {
                "module_flops": mine_all.get("module_flops") or _UNAVAILABLE["module_flops"],
                "macs": mine_all.get("macs") or _UNAVAILABLE["macs"],
                "dmas": mine_all.get("dmas") or _UNAVAILABLE["dmas"],
            }
            continue
        inclusive = call.handler is not None and call.handler.inclusive
        whole: dict[str, MetricResult] = {}
        for name in COST_METRICS:
            mine = mine_all.get(name) or _UNAVAILABLE[name]
            if inclusive and name in mine_all:
                whole[name] = mine
            else:
                parts = [mine] + [aggregates[c][name] for c in call.children]
                whole[name] = sum_metric(name, parts)
        aggregates[i] = whole
    return aggregates


def _operator_metric(flops: int, exact: bool) -> MetricResult:
    if exact:
        return MetricResult.complete(flops, unit=OPERATOR_UNIT, scope=SCOPE, method=OPERATOR_METHOD)
    return MetricResult.partial(flops, unit=OPERATOR_UNIT, scope=SCOPE, method=OPERATOR_METHOD)


def operator_flops(calls: list[Call], owner_ops: dict[Any, OwnerOps]) -> list[LayerOperatorFlops]:
    """Per call: operator FLOPs it dispatched itself and over its whole call (children in)."""
    n = len(calls)
    # [own flops, own exact, own products, products exact, incl flops, incl exact, ...]
    sums: list[list[Any]] = [[] for _ in range(n)]
    for i in range(n - 1, -1, -1):
        ops = owner_ops.get(calls[i].key)
        if ops is None:
            own = [0, True, 0, True]
        else:
            own = [ops.flops, ops.complete, ops.product_flops]
            own.append(ops.complete and not ops.unclassified_calls)
        total = list(own)
        for c in calls[i].children:
            child = sums[c]
            total[0] += child[4]
            total[1] = total[1] and child[5]
            total[2] += child[6]
            total[3] = total[3] and child[7]
        sums[i] = own + total
    shared: dict[tuple[Any, ...], LayerOperatorFlops] = {}  # frozen: equal counts share one
    records = []
    for s in sums:
        key = tuple(s)
        record = shared.get(key)
        if record is None:
            record = shared[key] = trusted_construct(
                LayerOperatorFlops,
                {
                    "own": _operator_metric(s[0], s[1]),
                    "inclusive": _operator_metric(s[4], s[5]),
                    "own_products": _operator_metric(s[2], s[3]),
                    "inclusive_products": _operator_metric(s[6], s[7]),
                },
            )
        records.append(record)
    return records


# -------------------------------------------------------------------------------- records


# the states below are written in these field orders; a model that gained or moved a field
# takes trusted_construct's checked path instead (defaults filled by model_construct)
_WRITTEN_ORDER: dict[type[BaseModel], list[str]] = {
    LayerRecord: [
        "path",
        "call_index",
        "name",
        "depth",
        "type",
        "is_leaf",
        "handler",
        "inclusive",
        "input",
        "output",
        "params",
        "metrics",
        "operator_flops",
    ],
    LayerMetrics: [*COST_METRICS, *RF_METRICS],
    ParameterStats: [
        "parameters",
        "trainable_parameters",
        "parameter_bytes",
        "buffer_elements",
        "buffer_bytes",
        "shared_parameters",
    ],
}
_DIRECT: dict[type[BaseModel], bool] = {
    cls: list(cls.__pydantic_fields__) == order and not cls.__pydantic_post_init__
    for cls, order in _WRITTEN_ORDER.items()
}


_NO_TENSORS: tuple[dict[str, int], list[tuple[int, int]]] = (
    dict.fromkeys(_WRITTEN_ORDER[ParameterStats], 0),
    [],
)


def _module_sums(module: nn.Module) -> tuple[dict[str, int], list[tuple[int, int]]]:
    """A ParameterStats state with shared_parameters 0, and the (id, numel) of each parameter."""
    plists = parametrization_lists(module) if "parametrizations" in module._modules else []
    packed = packed_tensors(module) if holds_packed_weights(module) else []
    if not module._parameters and not module._buffers and not plists and not packed:
        return _NO_TENSORS
    sums = tensor_sums((module,), own_parametrizations=True)
    state = {
        "parameters": sums.parameters,
        "trainable_parameters": sums.trainable_parameters,
        "parameter_bytes": sums.parameter_bytes,
        "buffer_elements": sums.buffer_elements,
        "buffer_bytes": sums.buffer_bytes,
        "shared_parameters": 0,
    }
    return state, list(sums.parameter_sizes)


def _records(
    calls: list[Call],
    aggregates: list[dict[str, MetricResult]],
    rf_values: list[tuple[MetricResult, MetricResult, MetricResult]],
    per_layer_ops: list[LayerOperatorFlops] | None,
    same_metrics: dict[str, MetricResult] | None = None,
) -> list[LayerRecord]:
    """One LayerRecord per call (``same_metrics``: one LayerMetrics state for every call).

    Parameter sums are taken once per module; a record's ``shared_parameters`` counts the
    parameters an earlier record already showed (another module holding the same tensor, or
    an earlier call of the same module)."""
    sums: dict[int, tuple[dict[str, int], list[tuple[int, int]]]] = {}
    seen: set[int] = set()
    records = []
    direct = all(_DIRECT.values())  # the written orders still match the models
    depths = call_depths(calls)  # path depth; a re-entered module's calls nested (call_tree)
    for i, call in enumerate(calls):
        module = call.module
        entry = sums.get(id(module))
        if entry is None:
            entry = sums[id(module)] = _module_sums(module)
        params = entry[0].copy()
        if entry[1]:
            shared = 0
            for key, n in entry[1]:
                if key in seen:
                    shared += n
                seen.add(key)
            params["shared_parameters"] = shared
        if same_metrics is not None:  # structure: every record's metrics are unavailable
            metrics = same_metrics.copy()
        else:
            aggregate = aggregates[i]
            rf, stride, pad = rf_values[i]
            metrics = {
                "module_flops": aggregate["module_flops"],
                "macs": aggregate["macs"],
                "dmas": aggregate["dmas"],
                "receptive_field": rf,
                "effective_stride": stride,
                "effective_padding": pad,
            }
        handler = call.handler
        path = call.path
        records.append(
            trusted_construct(  # fields typed by construction, in LayerRecord's field order
                LayerRecord,
                {
                    "path": path,
                    "call_index": call.call_index,
                    "name": path.rpartition(".")[2],
                    "depth": depths[i],
                    "type": type(module).__name__,
                    "is_leaf": not module._modules,
                    "handler": handler.label if handler is not None else None,
                    "inclusive": bool(handler is not None and handler.inclusive),
                    "input": call.inputs,
                    "output": call.output,
                    "params": trusted_construct(ParameterStats, params, in_order=direct),
                    "metrics": trusted_construct(LayerMetrics, metrics, in_order=direct),
                    "operator_flops": per_layer_ops[i] if per_layer_ops is not None else None,
                },
                in_order=direct,
            )
        )
    return records


def build(calls: list[Call], mode: Mode, counter: OperatorCounter | None, fill: Any) -> Built:
    """Records, aggregates and diagnostics of the recorded calls."""
    n = len(calls)
    if mode == "structure" or counter is None:
        unknown = {name: _UNAVAILABLE[name] for name in COST_METRICS}
        aggregates = [unknown] * n  # read only: every call's is the same
        same = {**unknown, **{name: unavailable(name) for name in RF_METRICS}}
        records = _records(calls, aggregates, [], None, same)
        return Built(records, aggregates, [], [], [])
    owner_ops = counter.live_owners()  # read only, after the counting
    own = _own_parts(calls, counter, owner_ops, fill)
    aggregates = _aggregate(calls, own.metrics)
    rf_values = receptive_chain(calls, own.rf_local, own.participates, own.diagnostics)
    per_layer_ops = operator_flops(calls, owner_ops)
    records = _records(calls, aggregates, rf_values, per_layer_ops)
    if own.filled:
        own.diagnostics.append(_fill_diagnostic(own.filled))
    return Built(records, aggregates, own.diagnostics, own.failures, own.filled)


def _fill_diagnostic(paths: list[str]) -> Diagnostic:
    shown = ", ".join(p or "<root>" for p in paths[:20])
    more = f" and {len(paths) - 20} more" if len(paths) > 20 else ""
    return Diagnostic(
        code="operator_fill",
        severity="info",
        metric="module_flops,macs,dmas",
        count=len(paths),
        message=f"fill_from_operators took the own module FLOPs of {len(paths)} module(s) "
        f"without a handler from the operators their own forward ran (method {FILL_METHOD}: "
        "FLOPs = their operator FLOPs, MACs = their tensor-product FLOPs / 2, DMAs "
        f"unavailable): {shown}{more}. Totals that include them carry method {MIXED_METHOD}.",
    )
