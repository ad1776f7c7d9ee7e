"""ModuleHandler, the one registry of module formulas, and its lookup.

Built-in formulas and user ``custom_modules`` are the same type and go through the same
lookup, so there is never a second table to drift out of sync. ``register_handler`` refuses
bad and duplicate keys (like torch's ``register_flop_formula``); lookup walks
``type(module).__mro__`` so subclasses resolve to their closest registered ancestor whose
``accepts`` check (the structure the formula reads: attributes, shapes, an unchanged
forward) holds for the module; a candidate that does not fit is passed over, never claimed.
An ancestor whose ``forward`` the subclass replaced claims it only per call, when the call
ran exactly that ancestor's one declared operator (``verified_subclass``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from torch import nn

from ..report import Diagnostic, MetricResult

FORMULA_METRICS: tuple[str, ...] = (
    "module_flops",
    "macs",
    "dmas",
    "receptive_field",
    "effective_stride",
    "effective_padding",
)
"""Metrics a handler may return. The last three are *local* (this layer's own kernel,
stride and padding); crawl_module chains them into cumulative values."""

METRIC_UNITS: dict[str, str] = {
    "module_flops": "FLOPs",
    "macs": "MACs",
    "dmas": "elements",
    "receptive_field": "input_positions",
    "effective_stride": "input_positions",
    "effective_padding": "input_positions",
}
SCOPE = "forward"
METHOD = "module_formula"
FILL_METHOD = "operator_fill"
"""Own module FLOPs/MACs of a module without handler, read from its own operator count
(``crawl_module(fill_from_operators=...)``); never reported under METHOD."""
MIXED_METHOD = "module_formula+operator_fill"
"""A sum of module-formula parts with at least one operator-filled part."""


@dataclass(frozen=True)
class OwnOperators:
    """The operators one module call dispatched itself, outside its child module calls.

    Read from the crawl's operator counter (method ``operator_dispatch``): ``flops`` is their
    count, ``product_flops`` its tensor-product share (2 per multiply-add of a matmul,
    convolution or attention product). ``complete`` is False when an operator had no formula;
    ``products_known`` is False when a formula's product share is unknown.
    """

    flops: int
    product_flops: int
    complete: bool
    products_known: bool
    operators: tuple[str, ...]
    calls: Mapping[str, int] = field(default_factory=dict)  # each operator's call count


@dataclass(frozen=True)
class CallContext:
    """Everything one module call saw: the handler's whole view of the call."""

    module: nn.Module
    path: str
    call_index: int
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    output: Any
    operators: Callable[[], OwnOperators | None] | None = field(default=None, repr=False)

    def own_operators(self) -> OwnOperators | None:
        """What this call dispatched itself (``mode="full"`` only; None otherwise).

        Lets a formula read the shapes of the products a module's forward ran (attention's
        two batched products) without a second pass; final once the call has returned.
        """
        return self.operators() if self.operators is not None else None


HandlerValue: TypeAlias = "int | float | MetricResult | None"
HandlerResult: TypeAlias = Mapping[str, Any]
Callback: TypeAlias = Callable[[CallContext], HandlerResult]


@dataclass(frozen=True)
class ModuleHandler:
    """A module cost estimate: ``callback(ctx)`` returns any subset of FORMULA_METRICS.

    Values are numbers (complete), MetricResult (its status and numbers are kept; unit, scope
    and method are set to the module-formula ones) or None (unavailable). A bool, NaN, an
    infinity or a negative count is refused (``handler_failed``), never summed. An optional
    ``"diagnostics"`` entry (list of Diagnostic or str) travels with the record.
    ``inclusive=True`` declares that the estimate covers the whole subtree, so children are
    not counted again in totals (their records are still produced). ``accepts(module)``
    checks, before the handler claims a module, the structure the formula relies on (a
    module it returns False for falls through to the next candidate along the MRO);
    ``expects`` says in words what that structure is, quoted in every failure message.
    """

    callback: Callback
    inclusive: bool = False
    name: str | None = field(default=None, compare=False)
    accepts: Callable[[nn.Module], bool] | None = field(default=None, compare=False)
    expects: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not callable(self.callback):
            raise TypeError(
                f"ModuleHandler(callback=...) must be callable, got {type(self.callback).__name__}"
            )
        if not isinstance(self.inclusive, bool):
            raise TypeError(f"ModuleHandler(inclusive=...) must be a bool, got {self.inclusive!r}")
        if self.accepts is not None and not callable(self.accepts):
            raise TypeError(
                "ModuleHandler(accepts=...) must be callable(module) -> bool, "
                f"got {type(self.accepts).__name__}"
            )

    def fits(self, module: nn.Module) -> bool:
        """Does ``module`` have the structure this handler reads? (True without ``accepts``;
        a check that raises counts as False: the structure is not there.)"""
        if self.accepts is None:
            return True
        try:
            return bool(self.accepts(module))
        except Exception:  # an attribute the check reads is missing: the module does not fit
            return False

    @property
    def label(self) -> str:
        return self.name or str(getattr(self.callback, "__qualname__", repr(self.callback)))


HANDLERS: dict[type[nn.Module], ModuleHandler] = {}


def _check_module_type(key: Any, where: str) -> type[nn.Module]:
    if not (isinstance(key, type) and issubclass(key, nn.Module)):
        raise TypeError(f"{where}: keys must be nn.Module subclasses, got {key!r}")
    return key


def register_handler(
    *module_types: type[nn.Module],
    inclusive: bool = False,
    name: str | None = None,
    accepts: Callable[[nn.Module], bool] | None = None,
    expects: str | None = None,
) -> Callable[[Callback], Callback]:
    """Decorator registering ``callback`` as the built-in handler of ``module_types``.

    ``name`` labels the handler in reports (default: the callback's qualified name);
    ``accepts``/``expects`` as on :class:`ModuleHandler`.
    """
    if not module_types:
        raise TypeError("register_handler() needs at least one nn.Module subclass")
    types = [_check_module_type(t, "register_handler") for t in module_types]
    for module_type in types:
        if module_type in HANDLERS:
            raise ValueError(f"register_handler: {module_type.__qualname__} already has a handler")

    def register(callback: Callback) -> Callback:
        label = name if name is not None else callback.__qualname__
        handler = ModuleHandler(
            callback, inclusive=inclusive, name=label, accepts=accepts, expects=expects
        )
        for module_type in types:
            HANDLERS[module_type] = handler
        return callback

    return register


def validate_custom_modules(
    custom_modules: Mapping[Any, Any] | None,
) -> dict[type[nn.Module], ModuleHandler]:
    """Check ``custom_modules`` before any forward; name the bad key or value."""
    if custom_modules is None:
        return {}
    if not isinstance(custom_modules, Mapping):
        raise TypeError(
            "custom_modules must be a mapping {ModuleType: ModuleHandler}, "
            f"got {type(custom_modules).__name__}"
        )
    checked: dict[type[nn.Module], ModuleHandler] = {}
    for key, handler in custom_modules.items():
        module_type = _check_module_type(key, "custom_modules")
        if not isinstance(handler, ModuleHandler):
            raise TypeError(
                f"custom_modules[{module_type.__qualname__}] must be a ModuleHandler, "
                f"got {type(handler).__name__}; wrap the function: ModuleHandler(callback)"
            )
        checked[module_type] = handler
    return checked


def lookup_handler(
    module_type: type[nn.Module],
    custom: Mapping[type[nn.Module], ModuleHandler],
    module: nn.Module | None = None,
) -> ModuleHandler | None:
    """Closest handler along the MRO that fits ``module``; at equal distance a custom handler
    wins. A candidate whose ``accepts`` refuses the module is passed over (without a module,
    every candidate is taken as fitting), and so is an ancestor's handler when
    ``module_type`` replaces that ancestor's ``forward`` (:func:`passed_over`)."""
    forward = _forward_of(module_type)
    for cls in module_type.__mro__:
        if cls is nn.Module:
            break
        own = _forward_of(cls)
        if cls is module_type or own is None or own is forward:  # a mixin has none
            for handler in (custom.get(cls) if custom else None, HANDLERS.get(cls)):
                if handler is not None and (module is None or handler.fits(module)):
                    return handler
            continue
        # an ancestor whose forward this class replaced: its handler only under the check of
        # what the call ran (verified_subclass), when the ancestor declares its operators
        base = HANDLERS.get(cls)
        declared = base is not None and cls in BASE_OPERATORS and not base.inclusive
        if declared and (module is None or base.fits(module)):  # type: ignore[union-attr]
            return verified_subclass(module_type, cls)
    return None


# The arithmetic operators (those a formula counts) one call of a base class's own forward
# runs, each once: a subclass that replaced forward and ran exactly one of these, once, and
# nothing else that computes (views and copies aside), did what the base's formula describes
# (ConvNeXt's channels-first LayerNorm permutes around F.layer_norm); anything else
# (M2M100's embedding scaled by a multiply, BiT's convolution of a batch-normalised weight)
# is not the base's computation, and its cost comes from its own operators.
BASE_OPERATORS: dict[type[nn.Module], frozenset[str]] = {}
DECLINED: Any = type("Declined", (), {"__repr__": lambda self: "DECLINED"})()
_VERIFIED: dict[tuple[type[nn.Module], type[nn.Module]], ModuleHandler] = {}


def base_operators(*module_types: type[nn.Module], operators: tuple[str, ...]) -> None:
    """Declare the operators of ``module_types``' own forward (see BASE_OPERATORS)."""
    for module_type in module_types:
        if module_type in BASE_OPERATORS:
            raise ValueError(f"base_operators: {module_type.__qualname__} already declared")
        BASE_OPERATORS[_check_module_type(module_type, "base_operators")] = frozenset(operators)


def verified_subclass(module_type: type[nn.Module], base: type[nn.Module]) -> ModuleHandler:
    """``base``'s handler for a subclass that replaced its forward, checked per call: a call
    whose own operators are not exactly one of the base's (once) returns :data:`DECLINED`,
    and the crawl then treats it as a module without handler."""
    key = (module_type, base)
    found = _VERIFIED.get(key)
    if found is not None:
        return found
    handler, allowed = HANDLERS[base], BASE_OPERATORS[base]

    def verified(ctx: CallContext) -> HandlerResult:
        ops = ctx.own_operators()
        if ops is None or not ops.complete or len(ops.operators) != 1:
            return DECLINED
        (name,) = ops.operators
        if name not in allowed or ops.calls.get(name) != 1:
            return DECLINED
        return handler.callback(ctx)

    found = _VERIFIED[key] = ModuleHandler(
        verified,
        name=f"{handler.label} (verified: {module_type.__name__} replaces forward)",
        accepts=handler.accepts,
        expects=handler.expects,
    )
    return found


def passed_over(
    module_type: type[nn.Module], custom: Mapping[type[nn.Module], ModuleHandler] | None = None
) -> type[nn.Module] | None:
    """The ancestor whose handler ``module_type`` does not get because it replaces that
    ancestor's ``forward`` (M2M100's scaled word embedding multiplies ``nn.Embedding``'s
    output; BiT's convolution standardizes its weight first): the formula would describe a
    computation the subclass does not run, so its cost comes from its own operators."""
    forward = _forward_of(module_type)
    for cls in module_type.__mro__[1:]:
        if cls is nn.Module:
            return None
        own = _forward_of(cls)  # None: a mixin (LazyModuleMixin) has none
        if (
            own is not None
            and own is not forward
            and (cls in HANDLERS or (custom and cls in custom))
        ):
            return cls
    return None


def _forward_of(cls: type) -> Any:
    """The ``forward`` entry ``cls`` inherits, as stored in the class that defines it (no
    descriptor runs: a scripted module's class-level ``forward`` raises), None for none."""
    for klass in cls.__mro__:
        entry = vars(klass).get("forward")
        if entry is not None:
            return entry
    return None


def same_forward(base: type[nn.Module]) -> Callable[[nn.Module], bool]:
    """An ``accepts`` check: the module runs ``base``'s own forward (a subclass that replaces
    forward computes something else, which ``base``'s formula does not describe)."""

    def accepts(module: nn.Module) -> bool:
        return type(module).forward is base.forward

    accepts.__qualname__ = f"same_forward({base.__qualname__})"
    return accepts


# effective padding may be negative (a transposed convolution with a large padding); every
# other metric is a count or a size
_MAY_BE_NEGATIVE = frozenset({"effective_padding"})


def _check_number(name: str, value: int | float) -> None:
    """Refuse NaN, infinities and negative counts: they would be summed as if true."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"metric {name!r} must be a finite number, got {value!r}")
    if value < 0 and name not in _MAY_BE_NEGATIVE:
        raise ValueError(f"metric {name!r} must not be negative, got {value!r}")


def complete_metric(name: str, value: int) -> MetricResult:
    """The complete module-formula result for an int count of metric ``name``.

    Shared through MetricResult.complete's own cache, the one interning cache of results: a
    dict in front of it saved nothing measurable (``bench_crawl.py --scaffolding``, process
    CPU time, load average ~14 on 2 cores: 1.00x on the Transformer, 1.03x on 5,000 blocks,
    within that load's noise), so it was removed.
    """
    return MetricResult.complete(value, unit=METRIC_UNITS[name], scope=SCOPE, method=METHOD)


def to_metric(name: str, value: Any) -> MetricResult:
    """A handler's value for ``name`` as a MetricResult with module-formula unit/scope/method.

    TypeError for a bool or a non-number, ValueError for NaN, an infinity or a negative count
    (the crawl turns either into a ``handler_failed`` diagnostic naming the value).
    """
    if type(value) is int and value >= 0:  # the common case, first
        return complete_metric(name, value)
    unit = METRIC_UNITS[name]
    if value is None:
        return MetricResult.unavailable(unit=unit, scope=SCOPE, method=METHOD)
    if isinstance(value, MetricResult):
        if value.known_value is not None:
            _check_number(name, value.known_value)
        return MetricResult(
            status=value.status,
            value=value.value,
            known_value=value.known_value,
            unit=unit,
            scope=SCOPE,
            method=METHOD,
        )
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"metric {name!r} must be a number, MetricResult or None, got {value!r}")
    _check_number(name, value)
    return MetricResult.complete(value, unit=unit, scope=SCOPE, method=METHOD)


def as_diagnostics(items: Any, path: str) -> list[Diagnostic]:
    """Normalise a handler's ``diagnostics`` entry."""
    if not items:
        return []
    out: list[Diagnostic] = []
    for item in items:
        if isinstance(item, Diagnostic):
            out.append(item if item.path is not None else item.model_copy(update={"path": path}))
        else:
            out.append(Diagnostic(code="handler_note", message=str(item), path=path))
    return out


def expectation(handler: ModuleHandler) -> str:
    """What a handler relies on, for its failure messages: its ``expects`` text, else the
    first line of its callback's docstring, else the generic handler contract."""
    if handler.expects:
        return handler.expects
    doc = (getattr(handler.callback, "__doc__", None) or "").strip()
    if doc:
        return f"the call its formula describes ({doc.splitlines()[0].rstrip('.')})"
    return (
        "a call it can describe, returning a mapping of metrics "
        f"(any of {', '.join(FORMULA_METRICS)}) with counts >= 0"
    )
