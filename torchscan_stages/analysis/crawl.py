"""crawl_module: one evaluation forward under hooks, one record per module call.

The hooks (:class:`_Recorder`) only capture cheap metadata and call the module's handler;
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
import functools
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
from torch.utils._python_dispatch import _disable_current_modes

from .._gc import gc_paused
from ..devices import resolve_device
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
from ._walk import named_modules
from .handlers import (
    DECLINED,
    HANDLERS,
    SCOPE,
    CallContext,
    ModuleHandler,
    OwnOperators,
    lookup_handler,
    validate_custom_modules,
)
from .hf_registration import register_for
from .layer_records import Built, Call, Mode, build
from .model_forms import (
    data_free_kind,
    scripted_diagnostics,
    unwrap_compiled,
    without_data_diagnostics,
)
from .operators import OperatorCounter, StackOwner, classify_custom_mapping
from .parameters_only import parameters_only
from .parametrized import inside_parametrizations, with_parametrizations
from .tensor_meta import call_meta, meta_of
from .totals import lazy_diagnostic, lazy_paths, model_totals

COST_METRICS = ("module_flops", "macs", "dmas")

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
) -> tuple[tuple[Any, ...] | None, dict[str, Any]]:
    """The call's (args, kwargs); args None: no input was given (parameters only)."""
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
        if args is None and kwargs is None:  # a parameters-only report
            return None, call_kwargs
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


# ------------------------------------------------------------------------------ fill


def _check_fill(fill: Any) -> bool | tuple[type[nn.Module], ...]:
    """``fill_from_operators``: False, True, or module classes; TypeError naming a bad item."""
    if isinstance(fill, bool):
        return fill
    if fill is None:
        return False
    if isinstance(fill, type) or not isinstance(fill, Iterable):
        raise TypeError(
            f"fill_from_operators must be True/False or a list of nn.Module classes, got {fill!r}"
        )
    classes = tuple(fill)
    for item in classes:
        if not (isinstance(item, type) and issubclass(item, nn.Module)):
            raise TypeError(f"fill_from_operators: {item!r} is not an nn.Module subclass")
    return classes


# ------------------------------------------------------------------------------ hooks


_get_ident = threading.get_ident
_new_context = object.__new__
_set_dict = object.__setattr__


def _checks_structure(
    module_type: type[nn.Module], custom: Mapping[type[nn.Module], ModuleHandler]
) -> bool:
    """Does any candidate handler of ``module_type`` check each module's structure? (Then
    the lookup runs per module: two instances of a class can differ in what they hold.)"""
    for cls in module_type.__mro__:
        for handler in (custom.get(cls) if custom else None, HANDLERS.get(cls)):
            if handler is not None and handler.accepts is not None:
                return True
        if cls is nn.Module:
            break
    return False


class _Recorder:
    """The crawl's two global hooks and the call tree they build (crawling thread only).

    One global pre-hook and one global hook (filtered to this model's modules and to the
    thread that crawls) instead of two handles per module: registration stays O(1), and
    PyTorch's fused fast paths, which refuse modules that carry their own hooks, run as in
    a plain forward. The hooks are the hot path: one dict lookup, one Call, one capture each.
    """

    def __init__(
        self, module: nn.Module, full: bool, custom: Mapping[type[nn.Module], ModuleHandler]
    ) -> None:
        self.full = full
        self.thread = _get_ident()
        self.calls: list[Call] = []
        self.roots: list[int] = []  # calls made outside any recorded call (the model's own)
        self.stack: list[int] = []
        self.keys: list[str] = []
        self.inclusive_depth = 0
        self.counter: OperatorCounter | None = None
        # id(module) -> [module, path, handler, is_custom, calls so far]; the entry holds the
        # module, so while this recorder lives no other object can have a key's id
        self.known: dict[int, list[Any]] = {}
        named = named_modules(module)  # _walk: the same pairs, one loop
        self.modules = [sub for _, sub in named]
        hidden = inside_parametrizations(named)  # weight_norm & co: part of their owner's call
        if hidden:
            named = [(path, sub) for path, sub in named if id(sub) not in hidden]
        if not full:  # a structure crawl looks up no handler
            self.known = {id(sub): [sub, path, None, False, 0] for path, sub in named}
            return
        first_of_type = {type(sub): sub for sub in reversed(self.modules)}
        for sub in first_of_type.values():  # before any lookup: a subclass resolves to them
            register_for(sub)  # transformers' classes: built-in handlers, lazily
        by_type: dict[type[nn.Module], tuple[ModuleHandler | None, bool]] = {}
        for path, sub in named:
            found = by_type.get(type(sub))
            if found is None:  # one MRO walk per module type, not per module
                handler = lookup_handler(type(sub), custom, sub)
                is_custom = handler is not None and any(handler is h for h in custom.values())
                found = (handler, is_custom)
                if not _checks_structure(type(sub), custom):  # else: per instance
                    by_type[type(sub)] = found
            self.known[id(sub)] = [sub, path, found[0], found[1], 0]

    def own_operators(self, key: str) -> OwnOperators | None:
        counter = self.counter
        ops = counter.live_owner_ops(key) if counter is not None else None
        if ops is None:
            return OwnOperators(0, 0, True, True, ()) if counter is not None else None
        calls = {**ops.counted_calls, **ops.uncounted_calls}
        return OwnOperators(
            ops.flops,
            ops.product_flops,
            ops.complete,
            ops.complete and not ops.unclassified_calls,
            tuple(sorted(calls)),
            calls,
        )

    def pre_hook(self, mod: nn.Module, hook_args: tuple[Any, ...]) -> None:
        entry = self.known.get(id(mod))
        if entry is None or _get_ident() != self.thread:
            return
        # _open, inline: one Python frame fewer on the hot path of every module call
        path, index = entry[1], entry[4]
        entry[4] = index + 1
        stack, calls = self.stack, self.calls
        position = len(calls)
        key = path if index == 0 else f"{path}#{index}"
        parent: int | None = None
        if stack:
            parent = top = stack[-1]
            siblings = calls[top].children
            if isinstance(siblings, list):
                siblings.append(position)
            else:
                calls[top].children = [position]
        else:
            self.roots.append(position)
        handler = entry[2]
        call = Call(mod, path, index, parent, handler, key, meta_of(hook_args))
        calls.append(call)
        stack.append(position)
        self.keys.append(key)
        if self.inclusive_depth:
            call.inside_inclusive = True
        if handler is not None and handler.inclusive:
            self.inclusive_depth += 1

    def post_hook(
        self, mod: nn.Module, hook_args: tuple[Any, ...], hook_kwargs: dict[str, Any], output: Any
    ) -> None:
        entry = self.known.get(id(mod))
        if entry is None or not self.stack or _get_ident() != self.thread:
            return
        call = self.calls[self.stack.pop()]
        self.keys.pop()
        call.output = meta_of(output)
        if hook_kwargs:
            call.inputs = call_meta(hook_args, hook_kwargs)
        handler = entry[2]
        if handler is not None:
            self._estimate(call, handler, entry[3], hook_args, hook_kwargs, output)

    def structure_pre_hook(self, mod: nn.Module, hook_args: tuple[Any, ...]) -> None:
        """``pre_hook`` for mode='structure': no handler, no operator owner (a structure crawl
        is mostly this hook)."""
        entry = self.known.get(id(mod))
        if entry is None or _get_ident() != self.thread:
            return
        path, index = entry[1], entry[4]
        entry[4] = index + 1
        stack, calls = self.stack, self.calls
        position = len(calls)
        parent: int | None = None
        if stack:
            parent = top = stack[-1]
            siblings = calls[top].children
            if isinstance(siblings, list):
                siblings.append(position)
            else:
                calls[top].children = [position]
        else:
            self.roots.append(position)
        key = path if index == 0 else f"{path}#{index}"
        calls.append(Call(mod, path, index, parent, None, key, meta_of(hook_args)))
        stack.append(position)

    def structure_post_hook(
        self, mod: nn.Module, hook_args: tuple[Any, ...], hook_kwargs: dict[str, Any], output: Any
    ) -> None:
        entry = self.known.get(id(mod))
        if entry is None or not self.stack or _get_ident() != self.thread:
            return
        call = self.calls[self.stack.pop()]
        call.output = meta_of(output)
        if hook_kwargs:
            call.inputs = call_meta(hook_args, hook_kwargs)

    def _estimate(
        self,
        call: Call,
        handler: ModuleHandler,
        is_custom: bool,
        hook_args: tuple[Any, ...],
        hook_kwargs: dict[str, Any],
        output: Any,
    ) -> None:
        """Run the call's handler while its tensors are alive (a failure is kept, not raised)."""
        if handler.inclusive:
            self.inclusive_depth -= 1
        # CallContext is a frozen dataclass: giving it its __dict__ at once skips its seven
        # object.__setattr__ calls (the same instance, equal to one built by __init__)
        context = _new_context(CallContext)
        _set_dict(
            context,
            "__dict__",
            {
                "module": call.module,
                "path": call.path,
                "call_index": call.call_index,
                "args": hook_args,
                "kwargs": hook_kwargs,
                "output": output,
                "operators": functools.partial(self.own_operators, call.key),
            },
        )
        try:
            if is_custom:  # user code: keep its tensor work out of the operator count
                with _disable_current_modes():
                    call.result = handler.callback(context)
            else:
                call.result = handler.callback(context)
            if call.result is DECLINED:  # a subclass that ran other work: no handler after all
                call.handler, call.result = None, None
                return
            if "parametrizations" in call.module._modules:
                call.result = with_parametrizations(call.result, call.module, call.path)
        except Exception as error:  # a failing estimate must not break the forward
            text = str(error).strip() or "(no message)"
            call.error = f"{type(error).__name__}: {text}"


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
    fill_from_operators: bool | Iterable[type[nn.Module]] = False,
) -> AnalysisReport:
    """Analyse one evaluation-mode ``no_grad`` forward call of ``module`` (docs/module-analysis.md).

    ``fill_from_operators`` (True, or module classes) takes the own module FLOPs and MACs of
    a module without a handler from the operators its own forward ran (method
    ``operator_fill``, listed in an ``operator_fill`` diagnostic) instead of leaving them
    unavailable; sums that include such a part carry method ``module_formula+operator_fill``.
    """
    module, notes = unwrap_compiled(module)  # model_forms: compiled, scripted, data-free
    call_args, call_kwargs = _prepare_call(module, input_shape, args, kwargs, dtype, device, mode)
    custom = validate_custom_modules(custom_modules)
    mapping = classify_custom_mapping(custom_mapping)
    fill = _check_fill(fill_from_operators)
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
            recorder = _Recorder(module, mode == "full", custom)
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
    recorder: _Recorder,
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
    recorder: _Recorder,
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
