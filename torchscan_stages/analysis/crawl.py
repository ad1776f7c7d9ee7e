"""crawl_module: one evaluation forward under hooks, one record per module call.

The hooks (``recorder``) only capture cheap metadata and call the module's handler;
records, aggregation, the receptive-field chain and totals are built after the forward
(``layer_records``). In ``full`` mode the forward runs under the operator counter, which
attributes every operator to the innermost active module call: each record carries its own
and inclusive operator FLOPs, and a module without a handler whose own forward computes is
detected (its module metrics become partial, or filled from its operators on request). Only
the crawling thread's calls are recorded; one crawl per model runs at a time. Training flags
and hooks are restored in ``finally``; grad mode by ``torch.no_grad``.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import torch
from torch import nn
from torch.nn.modules.module import (
    _global_forward_hooks_with_kwargs,
    register_module_forward_hook,
    register_module_forward_pre_hook,
)

from .._gc import gc_paused
from ..provenance import build_provenance
from ..report import (
    AnalysisReport,
    AnalysisTotals,
    Diagnostic,
    FlopReport,
    IncompleteAnalysisError,
    MetricResult,
)
from ..workloads import eager_compiled_code, lazy_output_diagnostic
from . import module_formulas  # noqa: F401  (fills the built-in handler registry)
from ._guards import depth_headroom, model_lock
from .crawl_inputs import check_fill, prepare_call
from .handlers import SCOPE, ModuleHandler, validate_custom_modules
from .layer_records import Built, Mode, build
from .layer_sums import COST_METRICS
from .model_forms import (
    data_free_kind,
    scripted_diagnostics,
    unwrap_compiled,
    without_data_diagnostics,
)
from .operators import OperatorCounter, StackOwner, classify_custom_mapping
from .parameters_only import parameters_only
from .recorder import Recorder
from .tensor_meta import call_meta
from .totals import lazy_diagnostic, lazy_paths, model_totals

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
    "layer_operator_flops": "each record's operator_flops: the operator FLOPs (method "
    "operator_dispatch, as measure_flops) dispatched while that call was innermost (own) and "
    "while it was active (inclusive, children included), with their tensor-product share; the "
    "root's inclusive count is totals.operator_flops; never added to module FLOPs",
    "operator_fill": "fill_from_operators: a module without handler takes its own module "
    "FLOPs from its own operator FLOPs and its MACs from its own tensor-product FLOPs / 2 "
    "(method operator_fill; DMAs unavailable); sums including one carry method "
    "module_formula+operator_fill",
    "paths": "the root is the empty path; other paths are named_modules() names; a module "
    "called several times has one record per call (call_index 0, 1, ...); a call made while "
    "the same module is still running (a forward that calls itself) is one level deeper than "
    "the call that made it, and only depth-0 records are summed into the totals",
}


# -------------------------------------------------------------------------------- crawl


# eleven parameters, over the 8-parameter cap: the public signature of the spec (API.md) and
# docs/api.md, kept as published
def crawl_module(  # noqa: PLR0913 - the public spec (docs/api.md) fixes this signature
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
    fill_from_operators: bool | Iterable[type[nn.Module]] = False,
) -> AnalysisReport:
    """Analyse one evaluation-mode ``no_grad`` forward call of ``module`` (docs/module-analysis.md).

    ``fill_from_operators`` (True, or module classes) takes the own module FLOPs and MACs of
    a module without a handler from the operators its own forward ran (method
    ``operator_fill``, listed in an ``operator_fill`` diagnostic) instead of leaving them
    unavailable; sums that include such a part carry method ``module_formula+operator_fill``.
    """
    module, notes = unwrap_compiled(module)  # model_forms: compiled, scripted, data-free
    call_args, call_kwargs = prepare_call(module, input_shape, args, kwargs, dtype, device, mode)
    custom = validate_custom_modules(custom_modules)
    mapping = classify_custom_mapping(custom_mapping)
    fill = check_fill(fill_from_operators)
    if call_args is None:  # no input at all: parameters only, nothing runs (parameters_only)
        report = parameters_only(module, mode)
        report.conventions = dict(CONVENTIONS)
        report.diagnostics[:0] = notes + scripted_diagnostics(module)
        if strict and (incomplete := _incomplete(report, [])):
            raise IncompleteAnalysisError(report, incomplete)
        return report
    notes += scripted_diagnostics(module)
    notes += without_data_diagnostics(data_free_kind([call_args, call_kwargs]))
    # see _gc and _guards: no collections during the call, one crawl per model at a time,
    # and a plain forward's recursion depth
    with gc_paused():
        with model_lock(module), depth_headroom():
            module = _own_flags(module)
            recorder = Recorder(module, mode == "full", custom)
            with eager_compiled_code("the crawl's forward", module) as compiled:
                output = _run(module, recorder, mapping, call_args, call_kwargs)
        built = build(recorder.calls, mode, recorder.counter, fill)
        report = _assemble(module, mode, built, recorder, call_args, call_kwargs, output)
        failures = built.handler_failures
        # the calls and per-call scratch die here, by reference count: the collector's first
        # pass after the pause then scans only what the report keeps
        del recorder, built, output
    unwrapped = any(d.code == "compiled_module_unwrapped" for d in notes)
    report.diagnostics[:0] = notes + ([] if unwrapped else compiled)
    if strict:
        incomplete = _incomplete(report, failures)
        if incomplete:
            raise IncompleteAnalysisError(report, incomplete)
    return report


def _own_flags(module: nn.Module) -> nn.Module:
    """The module tree the crawl may switch to eval mode without another thread seeing it.

    Alone in the process, that is ``module`` itself (its flags are restored after). With
    other threads alive and a module in training mode, a thread training the model would
    see eval-mode Dropout for the duration: the crawl then runs on a shallow copy of the
    module tree (new module objects with their own ``training`` flags, sharing every
    parameter, buffer and hook), so the shared model's flags are never touched."""
    if threading.active_count() == 1 or not any(sub.training for sub in module.modules()):
        return module
    copies: dict[int, nn.Module] = {}

    def copy_of(sub: nn.Module) -> nn.Module:
        found = copies.get(id(sub))
        if found is None:
            found = copies[id(sub)] = _shallow_copy(sub)
            found.__dict__["_modules"] = {
                name: None if child is None else copy_of(child)
                for name, child in sub._modules.items()
            }
        return found

    return copy_of(module)


def _run(
    module: nn.Module,
    recorder: Recorder,
    mapping: dict[Any, Any],
    call_args: tuple[Any, ...],
    call_kwargs: dict[str, Any],
) -> Any:
    """The one hooked forward; every training flag and hook is restored, also on error."""
    modules = recorder.modules
    flags = [sub.training for sub in modules]
    handles: list[Any] = []
    try:
        full = recorder.full
        pre = recorder.pre_hook if full else recorder.structure_pre_hook
        post = recorder.post_hook if full else recorder.structure_post_hook
        handles.append(register_module_forward_pre_hook(pre))
        handles.append(register_module_forward_hook(post, with_kwargs=True))
        _to_eval(module, modules, flags)
        with torch.no_grad():
            if recorder.full:
                recorder.counter = OperatorCounter(mapping or None, owner=StackOwner(recorder.keys))
                with recorder.counter:
                    return module(*call_args, **call_kwargs)
            return module(*call_args, **call_kwargs)
    finally:
        for handle in handles:
            handle.remove()
            # torch's RemovableHandle forgets the with_kwargs flag of a global hook (it only
            # clears the always_called dict): drop it so no trace of the crawl remains.
            _global_forward_hooks_with_kwargs.pop(handle.id, None)
        for sub, flag in zip(modules, flags, strict=True):
            if sub.training != flag:  # most models are crawled as they stand: nothing to do
                sub.training = flag


def _to_eval(module: nn.Module, modules: list[nn.Module], flags: list[bool]) -> None:
    """``module.eval()``, without a Python ``train()`` frame per module where that is all it is.

    A type that overrides ``train`` or ``__setattr__`` gets the real ``module.eval()``; when
    every type is plain, only the modules found training (``flags``) are switched.
    """
    plain = _PLAIN_TRAIN
    for cls in {type(sub) for sub in modules}:  # one check per type
        ok = plain.get(cls)
        if ok is None:
            ok = plain[cls] = cls.train is nn.Module.train and cls.__setattr__ is _MODULE_SETATTR
        if not ok:
            module.eval()
            return
    if not any(flags):
        return
    for sub, training in zip(modules, flags, strict=True):
        if training:
            sub.__dict__["training"] = False


_PLAIN_TRAIN: dict[type, bool] = {}


def _shallow_copy(sub: nn.Module) -> nn.Module:
    """``copy.copy(sub)``; a parametrised module (weight_norm) refuses to be pickled, and so
    copied ("Serialization of parametrized modules ..."): its ``__dict__`` is copied as is."""
    try:
        return copy.copy(sub)
    except RuntimeError:
        found: nn.Module = object.__new__(type(sub))
        found.__dict__.update(sub.__dict__)
        return found


_MODULE_SETATTR = nn.Module.__setattr__


def _empty_input(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Diagnostic | None:
    """Every tensor input has no elements (a batch of 0): the costs are those of no work."""
    tensors = [v for v in (*args, *kwargs.values()) if isinstance(v, torch.Tensor)]
    if not tensors or any(t.numel() for t in tensors):
        return None
    shapes = ", ".join(str(list(t.shape)) for t in tensors[:4])
    return Diagnostic(
        code="empty_input",
        severity="warning",
        message=f"every tensor input is empty ({shapes}): the costs describe a call that did no "
        "work on data; give a non-empty batch to measure the model",
    )


def _assemble(
    module: nn.Module,
    mode: Mode,
    built: Built,
    recorder: Recorder,
    call_args: tuple[Any, ...],
    call_kwargs: dict[str, Any],
    output: Any,
) -> AnalysisReport:
    """Turn the recorded calls and operator counts into the report (after the forward)."""
    diagnostics = list(built.diagnostics)
    operator_report: FlopReport | None = None
    if recorder.counter is not None:
        operator_report = recorder.counter.report(name=type(module).__name__)
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
    lazy = lazy_paths(module, recorder.modules)  # lazy modules the forward did not call
    totals = model_totals(recorder.modules, built, recorder.roots, operator_total, lazy)
    lazy_note = lazy_diagnostic(*lazy)
    if lazy_note is not None:
        diagnostics.append(lazy_note)
    empty = _empty_input(call_args, call_kwargs)
    if empty is not None:
        diagnostics.append(empty)
    # a forward that returned unrun work (a generator, a coroutine, a lazy iterator): the
    # same check and diagnostic as every other pass (workloads.py); costs are lower bounds
    deferred = lazy_output_diagnostic(output, "module_flops,macs,dmas,operator_flops")
    if deferred is not None:
        diagnostics.append(deferred)
        totals = _lower_bounds(totals)
    return AnalysisReport(
        provenance=build_provenance(),
        model_type=type(module).__name__,
        mode=mode,
        inputs=call_meta(call_args, call_kwargs),
        layers=built.records,
        totals=totals,
        operator_flops=operator_report,
        conventions=dict(CONVENTIONS),
        diagnostics=diagnostics,
    )


def _lower_bounds(totals: AnalysisTotals) -> AnalysisTotals:
    """Complete cost totals turned into lower bounds (the work was deferred)."""
    update = {}
    for name in (*COST_METRICS, "operator_flops"):
        result = getattr(totals, name)
        if result.is_complete:
            update[name] = MetricResult.partial(
                result.value, unit=result.unit, scope=result.scope, method=result.method
            )
    return totals.model_copy(update=update)


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
