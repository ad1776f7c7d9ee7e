"""Layer records from the recorded calls: parts, sums and receptive field as wire models.

Runs after the forward, so nothing here is on the hot path of the hooks. A record's own part
comes from its handler, or, without one, from the operators its own forward dispatched
(``own_parts``); aggregates add children's records (``layer_sums``); the receptive-field
chain follows completion order (``receptive``). Per-layer operator FLOPs (the
``measure_flops`` method) travel beside the module-formula metrics and are never added to them.
"""

from __future__ import annotations

from dataclasses import dataclass
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
    trusted_construct,
)
from .call_tree import Call, call_depths
from .call_values import tensor_sums
from .handlers import FILL_METHOD, MIXED_METHOD
from .layer_sums import COST_METRICS, RF_METRICS, aggregate, operator_flops, unavailable
from .operators import OperatorCounter
from .own_parts import own_parts
from .packed_params import holds_packed_weights, packed_tensors
from .parametrized import parametrization_lists
from .receptive import receptive_chain

Mode = Literal["full", "structure"]


@dataclass
class Built:
    records: list[LayerRecord]
    aggregates: list[dict[str, MetricResult]]
    diagnostics: list[Diagnostic]
    handler_failures: list[str]
    filled: list[str]


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
        unknown = {name: unavailable(name) for name in COST_METRICS}
        aggregates = [unknown] * n  # read only: every call's is the same
        same = {**unknown, **{name: unavailable(name) for name in RF_METRICS}}
        records = _records(calls, aggregates, [], None, same)
        return Built(records, aggregates, [], [], [])
    owner_ops = counter.live_owners()  # read only, after the counting
    own = own_parts(calls, counter, owner_ops, fill)
    aggregates = aggregate(calls, own.metrics)
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
