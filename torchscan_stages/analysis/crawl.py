"""crawl_module: one evaluation forward under hooks, one record per module call.

The hooks only capture cheap metadata and call the module's handler; everything else (wire
models, aggregation, receptive-field chain, totals) is built after the forward. In ``full``
mode the forward runs under the operator counter, which attributes every operator to the
innermost active module call; a module without a handler whose own forward does arithmetic
outside its children is thereby detected and its metrics become partial. Every training flag
and hook is restored in ``finally``; grad mode by ``torch.no_grad``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from torch import nn
from torch.nn.modules.module import (
    _global_forward_hooks_with_kwargs,
    register_module_forward_hook,
    register_module_forward_pre_hook,
)
from torch.utils._python_dispatch import _disable_current_modes

from ..devices import resolve_device
from ..provenance import build_provenance
from ..report import (
    AnalysisReport,
    AnalysisTotals,
    Diagnostic,
    FlopReport,
    IncompleteAnalysisError,
    LayerMetrics,
    LayerRecord,
    MetricResult,
    ParameterStats,
    combine_sum,
    trusted_construct,
)
from . import module_formulas  # noqa: F401  (fills the built-in handler registry)
from ._gc import gc_paused
from .handlers import (
    FORMULA_METRICS,
    METHOD,
    METRIC_UNITS,
    SCOPE,
    CallContext,
    ModuleHandler,
    as_diagnostics,
    lookup_handler,
    to_metric,
    validate_custom_modules,
)
from .model_forms import (
    data_free_kind,
    scripted_diagnostics,
    unwrap_compiled,
    without_data_diagnostics,
)
from .operators import OperatorCounter, OwnerOps, classify_custom_mapping
from .tensor_meta import RawMeta, call_capture, capture, to_value_meta

Mode = Literal["full", "structure"]
COST_METRICS = ("module_flops", "macs", "dmas")
RF_METRICS = ("receptive_field", "effective_stride", "effective_padding")
_VIEW_LIKE_REASONS = ("view or metadata", "host synchronisation", "profiler annotation")
# Operators that do no multiply-accumulate under the module formulas' conventions
# (activations, pooling and softmax modules have 0 MACs): a module running only these itself
# has exactly 0 own MACs. An allow-list, because a multiply hides MACs in many shapes (an
# affine x*g+b, a manual dot product, lerp, addcmul, linear upsampling, grid sampling).
_MAC_FREE_OPERATORS = frozenset(
    f"aten.{name}"
    for name in (  # noqa: SIM905 (a word list reads better than 90 lines of strings)
        "add add_ sub sub_ rsub neg neg_ abs abs_ div div_ true_divide maximum minimum relu "
        "relu_ relu6 relu6_ clamp clamp_ clamp_min clamp_min_ clamp_max clamp_max_ hardtanh "
        "hardtanh_ threshold threshold_ leaky_relu leaky_relu_ elu elu_ selu selu_ celu "
        "celu_ gelu gelu_ silu silu_ sigmoid sigmoid_ tanh tanh_ hardswish hardswish_ "
        "hardsigmoid hardsigmoid_ mish mish_ softplus exp exp_ log log_ sqrt sqrt_ rsqrt "
        "rsqrt_ eq ne lt le gt ge logical_and logical_or logical_not max_pool1d max_pool2d "
        "max_pool3d max_pool2d_with_indices max_pool3d_with_indices avg_pool1d avg_pool2d "
        "avg_pool3d _adaptive_avg_pool2d _adaptive_avg_pool3d adaptive_avg_pool1d "
        "adaptive_max_pool1d adaptive_max_pool2d adaptive_max_pool3d mean sum amax amin max "
        "min _softmax _log_softmax"
    ).split()
)

CONVENTIONS = {
    "flop": "one multiply-add = 2 FLOPs (1 MAC); each elementary add, multiply, divide, "
    "compare, exp, log, sqrt, tanh or erf = 1 FLOP",
    "dmas": "memory accesses in elements (not bytes): every input, parameter, buffer and "
    "output element the module reads or writes, each counted once (ideal caching)",
    "layer_metrics": "a record's module_flops/macs/dmas cover its whole call: its own formula "
    "plus its children's records, or the handler's estimate alone when it is inclusive",
    "totals": "module_flops/macs/dmas of the root call; parameters and buffers of the model, "
    "shared tensors counted once; operator_flops comes from operator dispatch of the same "
    "forward and is never added to module FLOPs",
    "receptive_field": "torchscan's recurrence over handled layers in call order: rf += "
    "stride*(k-1), padding += stride*p, stride *= s; each layer's kernel/stride/padding is the "
    "maximum over its spatial dims; a layer with no spatial meaning (attention, recurrent, "
    "unflatten, ...) or an unsupported layer ends the chain (later values unavailable)",
    "paths": "the root is the empty path; other paths are named_modules() names; a module "
    "called several times has one record per call (call_index 0, 1, ...)",
}


@dataclass
class _Call:
    """One module call, filled by the hooks (cheap fields only)."""

    module: nn.Module
    path: str
    call_index: int
    parent: int | None
    handler: ModuleHandler | None
    key: str
    inputs: RawMeta
    output: RawMeta | None = None
    result: Any = None
    error: str | None = None
    children: list[int] = field(default_factory=list)
    inside_inclusive: bool = False


# ------------------------------------------------------------------------------ arguments


def _shape_list(input_shape: Any) -> list[tuple[int, ...]]:
    """``input_shape`` as one shape per positional tensor; TypeError/ValueError otherwise."""

    def one(shape: Any, where: str) -> tuple[int, ...]:
        if not isinstance(shape, (tuple, list, torch.Size)):
            raise TypeError(f"{where} must be a tuple of ints, got {type(shape).__name__}")
        dims = []
        for dim in shape:
            if isinstance(dim, bool) or not isinstance(dim, int):
                raise TypeError(f"{where} must contain ints, got {dim!r} in {tuple(shape)!r}")
            if dim < 0:
                raise ValueError(f"{where} has a negative dimension: {tuple(shape)!r}")
            dims.append(dim)
        return tuple(dims)

    if not isinstance(input_shape, (tuple, list, torch.Size)):
        raise TypeError(
            "input_shape must be a tuple of ints (batch dimension excluded) or a list of such "
            f"tuples, got {type(input_shape).__name__}"
        )
    if input_shape and all(isinstance(s, (tuple, list, torch.Size)) for s in input_shape):
        return [one(s, f"input_shape[{i}]") for i, s in enumerate(input_shape)]
    return [one(input_shape, "input_shape")]


def _first_tensor_info(module: nn.Module) -> tuple[torch.dtype, torch.device]:
    for tensor in module.parameters():
        return tensor.dtype, tensor.device
    for buffer in module.buffers():
        return buffer.dtype, buffer.device
    return torch.float32, torch.device("cpu")


def _generate_inputs(
    module: nn.Module, shapes: list[tuple[int, ...]], dtype: Any, device: Any
) -> tuple[torch.Tensor, ...]:
    """Batch-of-1 inputs from a private generator (the global RNG is never touched)."""
    default_dtype, default_device = _first_tensor_info(module)
    if dtype is None:
        dtypes = [default_dtype] * len(shapes)
    elif isinstance(dtype, torch.dtype):
        dtypes = [dtype] * len(shapes)
    elif isinstance(dtype, (list, tuple)):
        if len(dtype) != len(shapes):
            raise ValueError(
                f"dtype has {len(dtype)} entries but input_shape gives {len(shapes)} inputs; "
                "pass one torch.dtype or one per input"
            )
        for i, item in enumerate(dtype):
            if not isinstance(item, torch.dtype):
                raise TypeError(f"dtype[{i}] must be a torch.dtype, got {item!r}")
        dtypes = list(dtype)
    else:
        raise TypeError(f"dtype must be a torch.dtype or a list of them, got {dtype!r}")
    # an absent device (cuda without a GPU) is a clear ValueError naming `device`
    target = resolve_device(device) if device is not None else default_device
    generator = torch.Generator().manual_seed(0)
    inputs = []
    for shape, item in zip(shapes, dtypes, strict=False):
        if item.is_floating_point or item.is_complex:
            tensor = torch.rand((1, *shape), generator=generator).to(item)
        else:  # integer/bool inputs: zeros, a valid index for any embedding
            tensor = torch.zeros((1, *shape), dtype=item)
        inputs.append(tensor.to(target))
    return tuple(inputs)


def _prepare_call(
    module: Any,
    input_shape: Any,
    args: Any,
    kwargs: Any,
    dtype: Any,
    device: Any,
    mode: Any,
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    if not isinstance(module, nn.Module):
        raise TypeError(f"module must be a torch.nn.Module, got {type(module).__name__}")
    if mode not in ("full", "structure"):
        raise ValueError(f"mode must be 'full' or 'structure', got {mode!r}")
    if input_shape is not None and args is not None:
        raise ValueError(
            "pass either input_shape (generated inputs) or args (your tensors), not both"
        )
    if kwargs is not None and not isinstance(kwargs, Mapping):
        raise TypeError(
            f"kwargs must be a mapping of keyword arguments, got {type(kwargs).__name__}"
        )
    call_kwargs = dict(kwargs or {})
    for key in call_kwargs:
        if not isinstance(key, str):
            raise TypeError(f"kwargs keys must be str, got {key!r}")
    if input_shape is None:
        if dtype is not None or device is not None:
            raise ValueError("dtype and device apply to generated inputs only; give input_shape")
        if args is None and kwargs is None:
            raise ValueError("give input_shape (generated inputs) or args/kwargs (your inputs)")
        if args is None:
            return (), call_kwargs
        if isinstance(args, torch.Tensor):
            return (args,), call_kwargs
        if not isinstance(args, (tuple, list)):
            raise TypeError(
                f"args must be a tuple of positional arguments, got {type(args).__name__}"
            )
        return tuple(args), call_kwargs
    shapes = _shape_list(input_shape)
    return _generate_inputs(module, shapes, dtype, device), call_kwargs


# ------------------------------------------------------------------------------- records


_UNAVAILABLE = {
    name: MetricResult.unavailable(unit=unit, scope=SCOPE, method=METHOD)
    for name, unit in METRIC_UNITS.items()
}
_ZERO = {
    name: MetricResult.complete(0, unit=unit, scope=SCOPE, method=METHOD)
    for name, unit in METRIC_UNITS.items()
}


def _unavailable(name: str) -> MetricResult:
    return _UNAVAILABLE[name]  # frozen models: one shared instance is safe


def _complete(name: str, value: int | float) -> MetricResult:
    if value == 0 and isinstance(value, int):
        return _ZERO[name]
    return MetricResult.complete(value, unit=METRIC_UNITS[name], scope=SCOPE, method=METHOD)


def _sum(name: str, parts: list[MetricResult]) -> MetricResult:
    if len(parts) == 1 and parts[0].unit == METRIC_UNITS[name]:  # a leaf: nothing to add
        return parts[0]
    return combine_sum(parts, unit=METRIC_UNITS[name], scope=SCOPE, method=METHOD)


def _handler_metrics(call: _Call) -> tuple[dict[str, MetricResult], list[Diagnostic], bool]:
    """(metrics, diagnostics, failed) from the handler's raw result."""
    assert call.handler is not None
    label = call.handler.label
    if call.error is not None:
        failed = Diagnostic(
            code="handler_failed",
            severity="error",
            path=call.path,
            message=f"handler {label} for {type(call.module).__name__} at {call.path or '<root>'}"
            f" (call {call.call_index}) raised {call.error}; its metrics are unavailable",
        )
        return {}, [failed], True
    result = call.result
    try:
        if not isinstance(result, Mapping):
            raise TypeError(f"returned {type(result).__name__}, expected a mapping of metrics")
        unknown = set(result) - set(FORMULA_METRICS) - {"diagnostics"}
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
            message=f"handler {label} at {call.path or '<root>'} (call {call.call_index}) "
            f"returned an invalid result: {error}",
        )
        return {}, [failed], True
    return metrics, diagnostics, False


def _macs_free(ops: OwnerOps) -> bool:
    """True when a module's own operators are known to do no multiply-accumulate.

    Every operator it ran itself must be counted by a built-in formula (no custom formula,
    nothing uncounted) and be on the allow-list: a residual ``add``, an activation, a
    pooling, a softmax or a plain reduction in a container's forward. Then the module's own
    MACs are exactly 0 even though its own FLOPs have no module formula.
    """
    return (
        not ops.uncounted_calls
        and not ops.unclassified_calls
        and all(name in _MAC_FREE_OPERATORS for name in ops.counted_calls)
    )


def _own_ops_state(ops: OwnerOps | None, counter: OperatorCounter) -> tuple[bool, bool, str]:
    """(does arithmetic, moves data, description) of a module's own operators."""
    if ops is None:
        return False, False, ""
    arithmetic = ops.flops > 0 or bool(ops.uncounted_calls)
    names = sorted([n for n, f in ops.op_flops.items() if f > 0] + list(ops.uncounted_calls))
    moves = [
        n for n in ops.ignored_calls if not counter.ignored_reason(n).startswith(_VIEW_LIKE_REASONS)
    ]
    return arithmetic, bool(moves), ", ".join(names) if names else ", ".join(sorted(moves))


@dataclass
class _Built:
    records: list[LayerRecord]
    aggregates: list[dict[str, MetricResult]]
    diagnostics: list[Diagnostic]
    handler_failures: list[str]


def _param_stats(module: nn.Module, seen: set[int]) -> ParameterStats:
    params = buffers = trainable = pbytes = bbytes = shared = 0
    for p in module._parameters.values():
        if p is None:
            continue
        n = p.numel()
        params += n
        trainable += n if p.requires_grad else 0
        pbytes += n * p.element_size()
        if id(p) in seen:
            shared += n
        seen.add(id(p))
    for b in module._buffers.values():
        if b is None:
            continue
        buffers += b.numel()
        bbytes += b.numel() * b.element_size()
    return trusted_construct(
        ParameterStats,
        {
            "parameters": params,
            "trainable_parameters": trainable,
            "parameter_bytes": pbytes,
            "buffer_elements": buffers,
            "buffer_bytes": bbytes,
            "shared_parameters": shared,
        },
    )


def _build(calls: list[_Call], mode: Mode, counter: OperatorCounter | None) -> _Built:
    n = len(calls)
    own: list[dict[str, MetricResult]] = [{} for _ in range(n)]
    rf_local: list[tuple[Any, Any, Any] | None] = [None] * n
    participates = [False] * n
    diagnostics: list[Diagnostic] = []
    failures: list[str] = []
    owner_ops = counter.owner_ops() if counter is not None else {}
    reported: set[tuple[str, str]] = set()

    for i, call in enumerate(calls):
        if mode == "structure":
            continue
        handler_ok = False
        if call.handler is not None:
            metrics, diags, failed = _handler_metrics(call)
            diagnostics.extend(diags)
            if failed:
                failures.append(f"layers[{call.path or '<root>'}#{call.call_index}]")
            else:
                handler_ok = True
                own[i] = metrics
                missing = [m for m in COST_METRICS if m not in metrics]
                if missing and (call.path, "missing") not in reported:
                    reported.add((call.path, "missing"))
                    diagnostics.append(
                        Diagnostic(
                            code="formula_unavailable",
                            path=call.path,
                            metric=",".join(missing),
                            message=f"{call.handler.label} gives no {', '.join(missing)} for "
                            f"{type(call.module).__name__} at {call.path or '<root>'}",
                        )
                    )
                if all(m in metrics and metrics[m].is_complete for m in RF_METRICS):
                    rf_local[i] = tuple(metrics[m].value for m in RF_METRICS)  # type: ignore[assignment]
                participates[i] = not call.inside_inclusive
        if handler_ok:
            continue
        ops = owner_ops.get(call.key)
        arithmetic, moves, what = _own_ops_state(ops, counter)  # type: ignore[arg-type]
        if call.handler is not None:  # failed handler: own work unknown
            own[i] = {m: _unavailable(m) for m in COST_METRICS}
            participates[i] = not call.inside_inclusive
            continue
        if arithmetic:
            own[i] = {m: _unavailable(m) for m in COST_METRICS}
            macs_free = ops is not None and _macs_free(ops)
            if macs_free:
                own[i]["macs"] = _complete("macs", 0)
            participates[i] = not call.children and not call.inside_inclusive
            if (call.path, "unsupported") not in reported:
                reported.add((call.path, "unsupported"))
                kind = "leaf module" if not call.children else "module"
                affected = (
                    "its module FLOPs and DMAs are a lower bound or unavailable (its MACs are "
                    "complete: those operators do no multiply-accumulate)"
                    if macs_free
                    else "its module metrics are a lower bound or unavailable"
                )
                diagnostics.append(
                    Diagnostic(
                        code="unsupported_module",
                        path=call.path,
                        metric="module_flops,dmas" if macs_free else "module_flops,macs,dmas",
                        message=f"{kind} {type(call.module).__name__} at {call.path or '<root>'} "
                        f"has no handler and its own forward computes outside its children "
                        f"({what}); {affected}. Pass custom_modules="
                        f"{{{type(call.module).__name__}: ModuleHandler(...)}} to count it.",
                    )
                )
        else:
            own[i] = {"module_flops": _complete("module_flops", 0), "macs": _complete("macs", 0)}
            if moves:
                own[i]["dmas"] = MetricResult.partial(
                    0, unit=METRIC_UNITS["dmas"], scope=SCOPE, method=METHOD
                )
                if (call.path, "moves") not in reported:
                    reported.add((call.path, "moves"))
                    diagnostics.append(
                        Diagnostic(
                            code="unmodelled_data_movement",
                            path=call.path,
                            metric="dmas",
                            message=f"{type(call.module).__name__} at {call.path or '<root>'} "
                            f"copies data in its own forward ({what}); its DMAs are a lower bound",
                        )
                    )
            else:
                own[i]["dmas"] = _complete("dmas", 0)

    # aggregates: children have larger indices than their parent, so one reverse pass
    aggregates: list[dict[str, MetricResult]] = [{} for _ in range(n)]
    for i in range(n - 1, -1, -1):
        call = calls[i]
        mine_all = own[i]
        if mode == "structure":
            aggregates[i] = {name: _UNAVAILABLE[name] for name in COST_METRICS}
        elif not call.children:  # a leaf: its own part is its whole call
            aggregates[i] = {m: mine_all.get(m) or _UNAVAILABLE[m] for m in COST_METRICS}
        else:
            inclusive = call.handler is not None and call.handler.inclusive
            for name in COST_METRICS:
                mine = mine_all.get(name) or _UNAVAILABLE[name]
                if inclusive and name in mine_all:
                    aggregates[i][name] = mine
                else:
                    parts = [mine] + [aggregates[c][name] for c in call.children]
                    aggregates[i][name] = _sum(name, parts)

    rf_values = _receptive_chain(calls, rf_local, participates, mode, diagnostics)

    seen: set[int] = set()
    records = []
    for i, call in enumerate(calls):
        metrics = dict(aggregates[i])
        for name, value in zip(RF_METRICS, rf_values[i], strict=False):
            metrics[name] = value
        records.append(
            trusted_construct(  # fields are typed by construction
                LayerRecord,
                {
                    "path": call.path,
                    "call_index": call.call_index,
                    "name": call.path.rpartition(".")[2],
                    "depth": 0 if not call.path else call.path.count(".") + 1,
                    "type": type(call.module).__name__,
                    "is_leaf": not call.module._modules,
                    "handler": call.handler.label if call.handler is not None else None,
                    "inclusive": bool(call.handler is not None and call.handler.inclusive),
                    "input": to_value_meta(call.inputs),
                    "output": to_value_meta(call.output) if call.output is not None else None,
                    "params": _param_stats(call.module, seen),
                    "metrics": trusted_construct(LayerMetrics, metrics),
                },
            )
        )
    return _Built(records, aggregates, diagnostics, failures)


def _receptive_chain(
    calls: list[_Call],
    local: list[tuple[Any, Any, Any] | None],
    participates: list[bool],
    mode: Mode,
    diagnostics: list[Diagnostic],
) -> list[tuple[MetricResult, MetricResult, MetricResult]]:
    """Cumulative (rf, stride, padding) per record, following calls in completion order."""
    none = (
        _unavailable("receptive_field"),
        _unavailable("effective_stride"),
        _unavailable("effective_padding"),
    )
    values = [none] * len(calls)
    if mode == "structure":
        return values
    order = _completion_order(calls)
    rf: Any = 1
    stride: Any = 1
    pad: Any = 0
    broken = False
    for i in order:
        call = calls[i]
        if call.inside_inclusive:
            continue
        if participates[i] and not broken:
            triple = local[i]
            if triple is None:
                broken = True
                diagnostics.append(
                    Diagnostic(
                        code="receptive_field_stopped",
                        severity="info",
                        path=call.path,
                        metric="receptive_field",
                        message=f"{type(call.module).__name__} at {call.path or '<root>'} has no "
                        "spatial receptive field; it and later layers report it as unavailable",
                    )
                )
            else:
                k, s, p = triple
                rf = rf + stride * (k - 1)
                pad = pad + stride * p
                stride = stride * s
        if not broken:
            values[i] = (
                _complete("receptive_field", _tidy(rf)),
                _complete("effective_stride", _tidy(stride)),
                _complete("effective_padding", _tidy(pad)),
            )
    return values


def _tidy(value: Any) -> int | float:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value  # type: ignore[no-any-return]


def _completion_order(calls: list[_Call]) -> list[int]:
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


# ------------------------------------------------------------------------------- totals


def _count(value: int, unit: str) -> MetricResult:
    return MetricResult.complete(value, unit=unit, scope="model", method="parameter_count")


def _unique_tensors(module: nn.Module) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Parameters and buffers of the model, each tensor once (what ``parameters()`` and
    ``buffers()`` give) from one walk over the modules instead of two generator chains."""
    params: dict[int, torch.Tensor] = {}
    buffers: dict[int, torch.Tensor] = {}
    for sub in module.modules():
        for p in sub._parameters.values():
            if p is not None:
                params.setdefault(id(p), p)
        for b in sub._buffers.values():
            if b is not None:
                buffers.setdefault(id(b), b)
    return list(params.values()), list(buffers.values())


def _totals(
    module: nn.Module, built: _Built, calls: list[_Call], operator_total: MetricResult
) -> AnalysisTotals:
    params, buffers = _unique_tensors(module)
    total = sum(p.numel() for p in params)
    trainable = sum(p.numel() for p in params if p.requires_grad)
    cost = {}
    roots = [i for i, c in enumerate(calls) if c.parent is None]
    for name in COST_METRICS:
        cost[name] = _sum(name, [built.aggregates[i][name] for i in roots])
        if not roots:
            cost[name] = _unavailable(name)
    return AnalysisTotals(
        parameters=_count(total, "parameters"),
        trainable_parameters=_count(trainable, "parameters"),
        frozen_parameters=_count(total - trainable, "parameters"),
        parameter_bytes=_count(sum(p.numel() * p.element_size() for p in params), "bytes"),
        buffer_elements=_count(sum(b.numel() for b in buffers), "elements"),
        buffer_bytes=_count(sum(b.numel() * b.element_size() for b in buffers), "bytes"),
        module_flops=cost["module_flops"],
        macs=cost["macs"],
        dmas=cost["dmas"],
        operator_flops=operator_total,
    )


# -------------------------------------------------------------------------------- crawl


def crawl_module(
    module: nn.Module,
    input_shape: Sequence[int] | Sequence[Sequence[int]] | None = None,
    *,
    args: Any = None,
    kwargs: Mapping[str, Any] | None = None,
    dtype: torch.dtype | Sequence[torch.dtype] | None = None,
    device: str | torch.device | None = None,
    mode: Mode = "full",
    strict: bool = False,
    custom_mapping: Mapping[Any, Any] | None = None,
    custom_modules: Mapping[type[nn.Module], ModuleHandler] | None = None,
) -> AnalysisReport:
    """Analyse one evaluation-mode ``no_grad`` forward call of ``module``; see API.md §2."""
    module, notes = unwrap_compiled(module)  # model_forms: compiled, scripted, data-free
    call_args, call_kwargs = _prepare_call(module, input_shape, args, kwargs, dtype, device, mode)
    custom = validate_custom_modules(custom_modules)
    mapping = classify_custom_mapping(custom_mapping)
    notes += scripted_diagnostics(module)
    notes += without_data_diagnostics(data_free_kind([call_args, call_kwargs]))
    with gc_paused():  # see _gc: setup, forward and assembly allocate without collections
        report = _crawl(module, mode, strict, call_args, call_kwargs, custom, mapping)
    report.diagnostics[:0] = notes
    return report


def _crawl(
    module: nn.Module,
    mode: Mode,
    strict: bool,
    call_args: tuple[Any, ...],
    call_kwargs: dict[str, Any],
    custom: Mapping[type[nn.Module], ModuleHandler],
    mapping: dict[Any, Any],
) -> AnalysisReport:
    """crawl_module after its arguments are checked: hooks, one forward, the report."""
    full = mode == "full"

    named = list(module.named_modules())
    calls: list[_Call] = []
    stack: list[int] = []
    keys: list[str] = []
    call_counts: dict[int, int] = {}
    inclusive_depth = [0]

    def owner() -> str | None:
        return keys[-1] if keys else None

    # One global pre-hook and one global hook (filtered to this model's modules) instead of
    # two handles per module: registration stays O(1), and PyTorch's fused fast paths, which
    # refuse modules that carry their own hooks, run as in a plain forward.
    known: dict[int, tuple[nn.Module, str, ModuleHandler | None, bool]] = {}
    for path, sub in named:
        handler = lookup_handler(type(sub), custom) if full else None
        is_custom = handler is not None and any(handler is h for h in custom.values())
        known[id(sub)] = (sub, path, handler, is_custom)

    def pre_hook(mod: nn.Module, hook_args: tuple[Any, ...]) -> None:
        entry = known.get(id(mod))
        if entry is None or entry[0] is not mod:
            return
        _, path, handler, _ = entry
        index = call_counts.get(id(mod), 0)
        call_counts[id(mod)] = index + 1
        parent = stack[-1] if stack else None
        key = path if index == 0 else f"{path}#{index}"
        position = len(calls)
        calls.append(
            _Call(
                mod,
                path,
                index,
                parent,
                handler,
                key,
                capture(hook_args),
                inside_inclusive=inclusive_depth[0] > 0,
            )
        )
        if parent is not None:
            calls[parent].children.append(position)
        stack.append(position)
        keys.append(key)
        if handler is not None and handler.inclusive:
            inclusive_depth[0] += 1

    def post_hook(
        mod: nn.Module, hook_args: tuple[Any, ...], hook_kwargs: dict[str, Any], output: Any
    ) -> None:
        entry = known.get(id(mod))
        if entry is None or entry[0] is not mod or not stack:
            return
        _, path, handler, is_custom = entry
        call = calls[stack.pop()]
        keys.pop()
        call.output = capture(output)
        if hook_kwargs:
            call.inputs = call_capture(hook_args, hook_kwargs)
        if handler is None:
            return
        if handler.inclusive:
            inclusive_depth[0] -= 1
        context = CallContext(mod, path, call.call_index, hook_args, hook_kwargs, output)
        try:
            if is_custom:  # user code: keep its tensor work out of the operator count
                with _disable_current_modes():
                    call.result = handler.callback(context)
            else:
                call.result = handler.callback(context)
        except Exception as error:  # a failing estimate must not break the forward
            call.error = f"{type(error).__name__}: {error}"

    flags = [(sub, sub.training) for _, sub in named]
    handles: list[Any] = []
    counter: OperatorCounter | None = None
    try:
        handles.append(register_module_forward_pre_hook(pre_hook))
        handles.append(register_module_forward_hook(post_hook, with_kwargs=True))
        module.eval()
        with torch.no_grad():
            if full:
                counter = OperatorCounter(mapping or None, owner=owner)
                with counter:
                    module(*call_args, **call_kwargs)
            else:
                module(*call_args, **call_kwargs)
    finally:
        for handle in handles:
            handle.remove()
            # torch's RemovableHandle forgets the with_kwargs flag of a global hook (it only
            # clears the always_called dict): drop it so no trace of the crawl remains.
            _global_forward_hooks_with_kwargs.pop(handle.id, None)
        for sub, flag in flags:
            sub.training = flag

    return _assemble(module, mode, strict, calls, counter, call_args, call_kwargs)


def _assemble(
    module: nn.Module,
    mode: Mode,
    strict: bool,
    calls: list[_Call],
    counter: OperatorCounter | None,
    call_args: tuple[Any, ...],
    call_kwargs: dict[str, Any],
) -> AnalysisReport:
    """Turn the recorded calls and operator counts into the report (after the forward)."""
    built = _build(calls, mode, counter)
    diagnostics = list(built.diagnostics)
    operator_report: FlopReport | None = None
    if counter is not None:
        operator_report = counter.report(name=type(module).__name__)
        operator_total = operator_report.total
        diagnostics.extend(operator_report.diagnostics)
    else:
        operator_total = MetricResult.unavailable(
            unit="FLOPs", scope=SCOPE, method="operator_dispatch"
        )
        diagnostics.append(
            Diagnostic(
                code="structure_mode",
                severity="info",
                message="mode='structure': shapes, layers and parameters only; module FLOPs, MACs, "
                "DMAs, receptive field and operator FLOPs were not computed (use mode='full')",
            )
        )
    report = AnalysisReport(
        provenance=build_provenance(),
        model_type=type(module).__name__,
        mode=mode,
        inputs=to_value_meta(call_capture(call_args, call_kwargs)),
        layers=built.records,
        totals=_totals(module, built, calls, operator_total),
        operator_flops=operator_report,
        conventions=dict(CONVENTIONS),
        diagnostics=diagnostics,
    )
    if strict:
        incomplete = _incomplete(report, built.handler_failures)
        if incomplete:
            raise IncompleteAnalysisError(report, incomplete)
    return report


def _incomplete(report: AnalysisReport, failures: list[str]) -> list[str]:
    """Requested metrics that are not complete (formula metrics only in full mode)."""
    names = ["parameters", "trainable_parameters", "parameter_bytes", "buffer_elements"]
    if report.mode == "full":
        names += ["module_flops", "macs", "dmas", "operator_flops"]
    listed = [
        f"totals.{name} ({getattr(report.totals, name).status})"
        for name in names
        if not getattr(report.totals, name).is_complete
    ]
    return listed + [f"{where} (handler_failed)" for where in failures]
