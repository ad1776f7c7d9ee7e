"""Sums over a crawl's call tree: whole-call module metrics and own/inclusive operator FLOPs.

A record's module FLOPs, MACs and DMAs are its own part plus its children's records (or the
handler's estimate alone when it is inclusive); its operator FLOPs are those dispatched while
it was innermost (own) and while it was active (inclusive). The two are never added together.
Also the metric helpers every layer part is made with.
"""

from __future__ import annotations

from typing import Any

from ..report import LayerOperatorFlops, MetricResult, combine_sum, trusted_construct
from .call_tree import Call
from .handlers import METHOD, METRIC_UNITS, MIXED_METHOD, SCOPE, complete_metric
from .operators import OwnerOps

COST_METRICS = ("module_flops", "macs", "dmas")
RF_METRICS = ("receptive_field", "effective_stride", "effective_padding")
OPERATOR_UNIT = "FLOPs"
OPERATOR_METHOD = "operator_dispatch"

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


def aggregate(calls: list[Call], own: list[dict[str, MetricResult]]) -> list[dict[str, Any]]:
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
