"""Operator FLOPs over torch's dispatch: :class:`OperatorCounter` and :func:`measure_flops`.

Every operator that reaches the dispatcher ends in exactly one of three outcomes, kept apart:

* **counted** -- a formula is known (user ``custom_mapping`` > formulas registered with
  torch's ``register_flop_formula`` after import > this package's ``operator_formulas`` >
  torch's shipped ``flop_registry``); its FLOPs are added (a formula may return 0);
* **ignored** -- a view, metadata, allocation, copy, selection or RNG operator: 0 FLOPs with a
  stated reason, listed in ``ignored_operators``;
* **uncounted** -- no formula and not known to be free: listed with its call count as an
  ``uncounted_operator`` diagnostic; the total becomes a ``partial`` lower bound.

Beside the total, ``product_flops`` keeps the tensor-product share (matmul, convolution,
attention's two batched products, RNN gate products): the convention of torch's
FlopCounterMode and fvcore, so a report can be checked against theirs or a paper's figure.
Every built-in formula declares its share (``operator_formulas.PRODUCT_SHARE``); torch's shipped
registry holds products only. A ``custom_mapping`` formula (or one registered with torch after
import) declares its share by returning :class:`Flops` ``(products, other)``; one that returns
a plain int has an unknown share, which leaves ``product_flops`` a lower bound with an
``unclassified_operator`` diagnostic.

Operators with a CompositeImplicitAutograd kernel and no formula are decomposed (as torch's
FlopCounterMode does) so their parts are counted instead. Formulas are merged into one table
per counter; torch's global registry is never modified.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry as _torch_flop_registry
from torch.utils.flop_counter import shape_wrapper as _torch_shape_wrapper

from ..._gc import gc_paused
from ...provenance import build_provenance
from ...report import (
    SCHEMA_VERSION,
    Diagnostic,
    FlopReport,
    IgnoredOperator,
    IncompleteAnalysisError,
    MetricResult,
    OperatorCount,
    trusted_construct,
)
from ...workloads import lazy_output_diagnostic
from .._walk import named_modules
from ..model_forms import tensor_data_kind, without_data_diagnostics
from ..operator_formulas import CONVENTIONS, FORMULAS, IGNORED, PRODUCT_SHARE, Flops, RawFormula

__all__ = [
    "Flops",
    "OperatorCounter",
    "OwnerKey",
    "OwnerOps",
    "StackOwner",
    "classify_custom_mapping",
    "count_workload",
    "measure_flops",
]

OwnerKey: TypeAlias = str
OpKey: TypeAlias = "torch._ops.OpOverloadPacket | torch._ops.OpOverload"

UNIT = "FLOPs"
METHOD = "operator_dispatch"
BASE_CONVENTION = (
    "one multiply-add counts as 2 FLOPs; matmul/conv/attention follow torch.utils.flop_counter's "
    "arithmetic (bias adds inside addmm/convolution are not counted, as in torch) except a "
    "grouped convolution's weight gradient, which torch counts groups times too large"
)

_COUNTED, _IGNORED, _DECOMPOSE, _UNCOUNTED = 0, 1, 2, 3
# product share of a counted operator: none, the whole count, Flops.products, unknown
_P_NONE, _P_ALL, _P_SPLIT, _P_UNKNOWN = 0, 1, 2, 3
_SHARE_CODES = {"none": _P_NONE, "all": _P_ALL, "split": _P_SPLIT}
PRODUCTS_CONVENTION = (
    "product_flops: the tensor-product share only (matmul, convolution, attention's two "
    "batched products, RNN gate products; 2 per multiply-add, bias adds excluded) -- what "
    "torch's FlopCounterMode and fvcore count"
)
# (outcome, formula, packet name, product share, callable that runs the operator)
Entry: TypeAlias = "tuple[int, RawFormula | None, str, int, Callable[..., Any]]"
_NAMESPACE_REASONS = {
    "profiler": "profiler annotation: no tensor arithmetic",
    "prim": "view or metadata: no values are read or computed",
}


@dataclass(slots=True)
class OwnerOps:
    """Operators dispatched while one owner was innermost (``None``: no owner active)."""

    flops: int = 0
    product_flops: int = 0
    counted_calls: dict[str, int] = field(default_factory=dict)
    ignored_calls: dict[str, int] = field(default_factory=dict)
    uncounted_calls: dict[str, int] = field(default_factory=dict)
    unclassified_calls: dict[str, int] = field(default_factory=dict)
    op_flops: dict[str, int] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return not self.uncounted_calls


# ------------------------------------------------------------------------ custom mapping


def classify_custom_mapping(custom_mapping: Any) -> dict[OpKey, Callable[..., int]]:
    """Validate ``{torch.ops.ns.op[.overload]: formula}``; TypeError naming a bad key or value.

    Returns a new dict (the caller's mapping is never kept). ``None`` means no overrides.
    """
    if custom_mapping is None:
        return {}
    if not isinstance(custom_mapping, Mapping):
        raise TypeError(
            "custom_mapping must be a mapping {torch.ops.aten.OP: formula}, got "
            f"{type(custom_mapping).__name__}"
        )
    checked: dict[OpKey, Callable[..., int]] = {}
    for key, formula in custom_mapping.items():
        if not isinstance(key, (torch._ops.OpOverloadPacket, torch._ops.OpOverload)):
            raise TypeError(
                f"custom_mapping key {key!r} ({type(key).__name__}) is not an operator: use an "
                "operator packet or overload such as torch.ops.aten.mm or "
                "torch.ops.aten.mm.default"
            )
        if not callable(formula):
            raise TypeError(
                f"custom_mapping[{key}] must be a callable formula(*arg_shapes, out_shape=..., "
                f"**kwargs) -> int, got {type(formula).__name__}"
            )
        checked[key] = formula
    return checked


def _shapes(value: Any) -> Any:
    """Tensors -> shapes, through lists/tuples: what ``shape_wrapper``'s pytree map does for
    operator arguments (which never hold dicts), at a fraction of its cost."""
    if isinstance(value, torch.Tensor):
        return value.shape
    if isinstance(value, torch.Size):
        return value
    if isinstance(value, list):
        return [_shapes(item) for item in value]
    if isinstance(value, tuple):  # plain tuples; structseq outputs become tuples too
        return tuple(_shapes(item) for item in value)
    return value


def _shape_formula(formula: Callable[..., int]) -> RawFormula:
    """Call ``formula(*arg_shapes, out_shape=..., **kwargs)`` (FlopCounterMode's contract)."""

    def shaped(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
        shape_kwargs = {key: _shapes(value) for key, value in kwargs.items()} if kwargs else {}
        return formula(*_shapes(args), out_shape=_shapes(out), **shape_kwargs)

    return shaped


def _raw_formula(formula: Callable[..., int]) -> RawFormula:
    """Call a raw formula ``formula(*args, out_val=out, **kwargs)`` on the tensors."""

    def raw(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
        return formula(*args, out_val=out, **kwargs)

    return raw


def _adapt_user_formula(formula: Callable[..., int]) -> RawFormula:
    """FlopCounterMode's contract: shapes in (``shape_wrapper``), or raw if ``_get_raw``."""
    if getattr(formula, "_get_raw", False):
        return _raw_formula(formula)
    return _shape_formula(formula)


_SHAPE_WRAPPER_CODE = _torch_shape_wrapper(lambda: 0).__code__


def _adapt_torch_formula(formula: Callable[..., int]) -> RawFormula:
    """torch's registry holds ``shape_wrapper``-wrapped formulas (unwrapped here so the cheap
    shape mapping replaces its pytree map) and raw ones (called as they are)."""
    inner = getattr(formula, "__wrapped__", None)
    if inner is not None and getattr(formula, "__code__", None) is _SHAPE_WRAPPER_CODE:
        return _shape_formula(inner)
    return _raw_formula(formula)


# torch's own formulas, as shipped (all tensor products); entries a user registers later with
# torch's register_flop_formula are theirs: they win over this package's and their product
# share is unknown
_TORCH_BUILTIN = frozenset(_torch_flop_registry)


@dataclass(slots=True)
class _Base:
    """The merged tables of one registry state, and the classifications made against them.

    ``entries`` (keyed by ``id(func)``) is shared by every counter without a custom mapping:
    an operator's outcome depends only on these tables, so each operator is classified once
    per process instead of once per ``measure_flops`` call. ``funcs`` keeps every classified
    operator alive, so an id is never reused for another operator.
    """

    key: tuple[int, int]
    table: dict[Any, RawFormula]
    shares: dict[Any, int]
    entries: dict[int, Entry] = field(default_factory=dict)
    funcs: list[Any] = field(default_factory=list)


_BASE: _Base | None = None
# packet name -> why it counts 0 FLOPs; depends only on IGNORED and the namespace, never on a
# counter's custom mapping (a custom formula makes the operator counted, not ignored)
_IGNORED_REASONS: dict[str, str] = {}


def _base_tables() -> _Base:
    """The merged formula table and product shares, rebuilt only when a registry grows.

    Building them hashes every packet through Python-level ``__hash__``, which cost more than
    a small model's whole forward when done per counter. Precedence: torch's shipped formulas
    < this package's (same arithmetic for mm, addmm, bmm, baddbmm, convolution and
    _convolution, read off the tensors without torch's pytree mapping; grouped convolution
    backward and the SDPA kernels counted differently, see operator_formulas) < formulas
    registered with torch after import. Published as one tuple, so a concurrent reader never
    sees a table without its shares.
    """
    global _BASE
    key = (len(_torch_flop_registry), len(FORMULAS))
    base = _BASE
    if base is None or base.key != key:
        shipped = {k: fn for k, fn in _torch_flop_registry.items() if k in _TORCH_BUILTIN}
        added = {k: fn for k, fn in _torch_flop_registry.items() if k not in _TORCH_BUILTIN}
        table = {
            **{k: _adapt_torch_formula(fn) for k, fn in shipped.items()},
            **FORMULAS,
            **{k: _adapt_torch_formula(fn) for k, fn in added.items()},
        }
        shares = dict.fromkeys(shipped, _P_ALL)
        for packet in FORMULAS:
            shares[packet] = _SHARE_CODES[PRODUCT_SHARE.get(packet, "none")]
        shares.update(dict.fromkeys(added, _P_UNKNOWN))
        base = _BASE = _Base(key, table, shares)
    return base


# ------------------------------------------------------------------------------ counter


class _FormulaError(Exception):
    pass


class _CountingMode(TorchDispatchMode):
    """The dispatch hook; all state lives on the owning :class:`OperatorCounter`.

    This is the hot path: one Python frame per dispatched operator plus its formula's. The
    operator runs through ``OpOverload._op`` (what ``OpOverload.__call__`` calls, one frame
    less), the owner is read off the module stack without a call, and an ignored operator or
    a formula answering a plain non-negative int is recorded inline; anything else (a
    ``Flops`` split, a float, an error, a custom formula) takes :meth:`OperatorCounter._settle`.
    """

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # torch wraps every subclass's __torch_dispatch__ in torch._dynamo.disable (two
        # more Python frames and four eval-frame swaps per operator, about a quarter of the
        # dispatch floor's overhead). The wrapper keeps Dynamo from tracing the handler;
        # _never_compiled does the same on the code object, so a workload that compiles and
        # runs torch.compile'd code under this mode still counts what eager counts, without a
        # warning (tests/analysis/test_operators_overhead.py).
        return False

    def __init__(self, counter: OperatorCounter) -> None:
        super().__init__()
        self.counter = counter

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        if kwargs is None:
            kwargs = {}
        counter = self.counter
        entry = counter._entries.get(id(func))  # OpOverload.__hash__ is a Python frame
        if entry is None:
            entry = counter._classify(func)
        kind, formula, name, share, call = entry
        if kind == _DECOMPOSE:
            with self:
                result = func.decompose(*args, **kwargs)
            if result is not NotImplemented:
                return result
            entry = counter._entries[id(func)] = (_UNCOUNTED, None, name, _P_NONE, call)
            kind = _UNCOUNTED
        out = call(*args, **kwargs)
        if counter.data_kind is _UNSEEN:  # first operator only: real, meta or fake tensors?
            counter._see_data(args, out)
        counter.grad_modes.add(_grad_enabled())
        stack = counter._owner_stack
        if stack is not None:
            key = stack[-1] if stack else None
        else:
            key = counter._owner() if counter._owner is not None else None
        ops = counter._by_owner.get(key)
        if ops is None:
            ops = counter._by_owner[key] = OwnerOps()
        if kind == _IGNORED:
            ops.ignored_calls[name] = ops.ignored_calls.get(name, 0) + 1
        elif kind == _COUNTED:
            try:
                value = formula(args, kwargs, out)  # type: ignore[misc]
            except Exception as error:  # a broken formula must not break the workload
                counter._formula_failed(func, name, ops, error)
                return out
            if type(value) is int and value >= 0 and share <= _P_ALL:
                ops.flops += value
                if share == _P_ALL:
                    ops.product_flops += value
                ops.counted_calls[name] = ops.counted_calls.get(name, 0) + 1
                ops.op_flops[name] = ops.op_flops.get(name, 0) + value
            else:
                counter._settle(func, name, share, value, ops)
        else:
            counter._uncounted_overloads.setdefault(name, set()).add(str(func))
            ops.uncounted_calls[name] = ops.uncounted_calls.get(name, 0) + 1
        return out


def _never_compiled(code: Any) -> None:
    """Keep Dynamo from compiling the dispatch hook and anything it calls.

    What torch's ``_dynamo.disable`` wrapper does, set on the code object instead (the C
    eval-frame hook reads it only while Dynamo runs), so eager counting pays nothing. Without
    it a workload that compiles under the counter would make Dynamo trace the hook, warn that
    it cannot trace the operator call, and fall back.
    """
    try:
        from torch._C._dynamo.eval_frame import (
            _FrameAction,
            _FrameExecStrategy,
            set_code_exec_strategy,
        )
    except ImportError:  # a torch build without Dynamo: nothing would compile the hook
        return
    set_code_exec_strategy(code, _FrameExecStrategy(_FrameAction.SKIP, _FrameAction.SKIP))


_never_compiled(_CountingMode.__torch_dispatch__.__code__)
_grad_enabled = torch.is_grad_enabled
_UNSEEN = "unseen"


def _first_tensor(value: Any) -> torch.Tensor | None:
    """The first tensor in ``value`` in pytree order (operator arguments and outputs nest in
    lists, tuples and at most dicts), without flattening everything the way tree_flatten does."""
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (list, tuple)):
        items: Any = value
    elif isinstance(value, dict):
        items = value.values()
    else:
        return None
    for item in items:
        found = _first_tensor(item)
        if found is not None:
            return found
    return None


def _whole_flops(value: Any) -> int:
    """A formula's answer as an int; a fractional or non-numeric answer is a broken formula.

    Truncating 2.5 to 2 would report a wrong number as complete; refusing it makes the
    operator uncounted with the formula's problem in the diagnostic instead.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        if hasattr(value, "__index__"):  # numpy / torch integer scalars
            return int(value.__index__())
        raise _FormulaError(f"returned {type(value).__name__} {value!r}, expected an int")
    if isinstance(value, float):
        if not value.is_integer():
            raise _FormulaError(f"returned a fractional count {value!r}, expected an int")
        return int(value)
    return value


class OperatorCounter:
    """Count operator FLOPs of everything dispatched inside ``with counter:``.

    ``owner`` (optional) is called for every operator and returns the key of the innermost
    active owner (a module path, say); results are kept per owner (:meth:`owner_ops`).
    ``custom_mapping`` formulas follow FlopCounterMode's shape contract and apply to this
    counter only. Not reentrant; the dispatch mode is popped in ``__exit__`` even on errors.
    """

    def __init__(
        self,
        custom_mapping: Mapping[Any, Callable[..., int]] | None = None,
        *,
        owner: Callable[[], OwnerKey | None] | None = None,
    ) -> None:
        custom = classify_custom_mapping(custom_mapping)
        if owner is not None and not callable(owner):
            raise TypeError(f"owner must be a callable returning a key, got {type(owner).__name__}")
        self._custom_overloads: dict[Any, RawFormula] = {
            key: _adapt_user_formula(fn)
            for key, fn in custom.items()
            if isinstance(key, torch._ops.OpOverload)
        }
        base = _base_tables()
        self._table: dict[Any, RawFormula] = base.table  # read only, unless copied below
        self._shares: dict[Any, int] = base.shares
        # keyed by id(func): OpOverload hashes in Python; _funcs keeps every key's operator
        # alive, so an id is never reused while this counter lives. Without a custom mapping
        # the classifications are the registry's, shared with every such counter.
        self._entries: dict[int, Entry] = base.entries
        self._funcs: list[Any] = base.funcs
        packets = {k: fn for k, fn in custom.items() if not isinstance(k, torch._ops.OpOverload)}
        if custom:
            self._entries, self._funcs = {}, []
        if packets:
            self._table = {**self._table}  # dict copies keep the stored hashes
            self._shares = {**self._shares}
            for key, fn in packets.items():
                self._table[key] = _adapt_user_formula(fn)
                self._shares[key] = _P_UNKNOWN
        self._owner = owner
        # a StackOwner's list (measure_flops' module stack, the crawl's keys) is read directly
        # (no call per operator); it is only ever mutated in place, so this reference stays valid
        self._owner_stack: list[str] | None = None
        if type(owner) is StackOwner:
            self._owner_stack = owner.stack
        self._by_owner: dict[OwnerKey | None, OwnerOps] = {}
        self._ignored_reasons = _IGNORED_REASONS
        self._uncounted_overloads: dict[str, set[str]] = {}
        self._formula_errors: dict[str, str] = {}
        self._mode: _CountingMode | None = None
        self._used = False
        self.grad_modes: set[bool] = set()  # grad mode of each recorded operator
        self.data_kind: str | None = _UNSEEN  # "meta" / "fake": ran without data (model_forms)

    # -- context manager ------------------------------------------------------------------

    def __enter__(self) -> OperatorCounter:
        if self._mode is not None:
            raise RuntimeError("OperatorCounter is not reentrant: it is already active")
        self._used = True
        self._mode = _CountingMode(self)
        self._mode.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        mode, self._mode = self._mode, None
        if mode is not None:
            mode.__exit__(*exc)

    # -- hot path -------------------------------------------------------------------------

    def _classify(self, func: Any) -> Entry:
        packet = func._overloadpacket
        name = str(packet)
        # a plain OpOverload's __call__ only forwards to _op: calling _op skips a frame
        call = func._op if type(func) is torch._ops.OpOverload else func
        entry: Entry
        if func in self._custom_overloads:
            entry = (_COUNTED, self._custom_overloads[func], name, _P_UNKNOWN, call)
        elif packet in self._table:
            entry = (_COUNTED, self._table[packet], name, self._shares[packet], call)
        elif packet in IGNORED:
            self._ignored_reasons[name] = IGNORED[packet]
            entry = (_IGNORED, None, name, _P_NONE, call)
        elif func.namespace in _NAMESPACE_REASONS:
            self._ignored_reasons[name] = _NAMESPACE_REASONS[func.namespace]
            entry = (_IGNORED, None, name, _P_NONE, call)
        elif torch._C.DispatchKey.CompositeImplicitAutograd in func.py_kernels or (
            torch._C._dispatch_has_kernel_for_dispatch_key(
                func.name(), torch._C.DispatchKey.CompositeImplicitAutograd
            )
        ):
            entry = (_DECOMPOSE, None, name, _P_NONE, call)
        else:
            entry = (_UNCOUNTED, None, name, _P_NONE, call)
        self._entries[id(func)] = entry
        self._funcs.append(func)
        return entry

    def _see_data(self, args: tuple[Any, ...], out: Any) -> None:
        """Whether the tensors hold data (real, or meta / fake), from the first one met."""
        first = _first_tensor(args)
        if first is None:
            first = _first_tensor(out)
        if first is not None:
            self.data_kind = tensor_data_kind(first)

    def _formula_failed(self, func: Any, name: str, ops: OwnerOps, error: Exception) -> None:
        """A formula raised or answered nonsense: the operator is uncounted, with why."""
        self._formula_errors.setdefault(str(func), f"{type(error).__name__}: {error}")
        self._uncounted_overloads.setdefault(name, set()).add(str(func))
        ops.uncounted_calls[name] = ops.uncounted_calls.get(name, 0) + 1

    def _settle(self, func: Any, name: str, share: int, value: Any, ops: OwnerOps) -> None:
        """Record a formula's answer that is not a plain non-negative int of known share."""
        try:
            if type(value) is Flops and share in (_P_SPLIT, _P_UNKNOWN):
                share = _P_SPLIT  # a user formula that declares its share
                products = _whole_flops(value.products)
                flops = products + _whole_flops(value.other)
            elif share == _P_SPLIT:
                raise _FormulaError(f"returned {value!r}, expected Flops(products, other)")
            else:
                flops = _whole_flops(value)
                products = flops if share == _P_ALL else 0
            if products < 0 or flops < products:  # a negative part of either kind
                raise _FormulaError(f"negative FLOPs ({value!r})")
        except Exception as error:
            self._formula_failed(func, name, ops, error)
            return
        ops.flops += flops
        ops.product_flops += products
        ops.counted_calls[name] = ops.counted_calls.get(name, 0) + 1
        ops.op_flops[name] = ops.op_flops.get(name, 0) + flops
        if share == _P_UNKNOWN:
            ops.unclassified_calls[name] = ops.unclassified_calls.get(name, 0) + 1

    # -- results --------------------------------------------------------------------------

    def owner_ops(self) -> dict[OwnerKey | None, OwnerOps]:
        """Per innermost owner: FLOPs and call counts (copies; safe to keep)."""
        return {
            key: OwnerOps(
                flops=ops.flops,
                product_flops=ops.product_flops,
                counted_calls=dict(ops.counted_calls),
                ignored_calls=dict(ops.ignored_calls),
                uncounted_calls=dict(ops.uncounted_calls),
                unclassified_calls=dict(ops.unclassified_calls),
                op_flops=dict(ops.op_flops),
            )
            for key, ops in self._by_owner.items()
        }

    def live_owners(self) -> dict[OwnerKey | None, OwnerOps]:
        """The counter's own per-owner records (not copies: read them, never change them).

        For a caller that reads every owner once the counting is over (the crawl's records):
        :meth:`owner_ops` would copy five dicts per owner, one owner per module call.
        """
        return self._by_owner

    def live_owner_ops(self, key: OwnerKey | None) -> OwnerOps | None:
        """The counter's own record for ``key`` (not a copy: read it, never change it)."""
        return self._by_owner.get(key)

    def ignored_reason(self, operator: str) -> str:
        """Why ``operator`` (a packet name such as ``aten.view``) counts 0 FLOPs."""
        return self._ignored_reasons.get(operator, "zero-FLOP operator")

    def uncounted_diagnostics(self, *, metric: str = "operator_flops") -> list[Diagnostic]:
        """One ``uncounted_operator`` diagnostic per packet without a (working) formula."""
        return self._uncounted_diagnostics(self._tally().uncounted, metric)

    def _uncounted_diagnostics(self, calls: dict[str, int], metric: str) -> list[Diagnostic]:
        diagnostics = []
        for name in sorted(calls):
            overloads = sorted(self._uncounted_overloads.get(name, ()))
            errors = [
                f"{o}: {self._formula_errors[o]}" for o in overloads if o in self._formula_errors
            ]
            if errors:
                why = "its formula failed (" + "; ".join(errors) + ")"
            else:
                why = "it has no FLOP formula and is not a known zero-FLOP operator"
            diagnostics.append(
                Diagnostic(
                    code="uncounted_operator",
                    severity="warning",
                    metric=metric,
                    operator=name,
                    count=calls[name],
                    message=(
                        f"{name} ({', '.join(overloads)}) ran {calls[name]} time(s) and was not "
                        f"counted: {why}; the total is a lower bound. If the count is known, "
                        f"pass custom_mapping={{torch.ops.{name}: formula}}."
                    ),
                )
            )
        return diagnostics

    def unclassified_diagnostics(self) -> list[Diagnostic]:
        """One ``unclassified_operator`` diagnostic per custom formula of unknown product share."""
        return _unclassified_diagnostics(self._tally().unclassified)

    def _tally(self) -> _Tally:
        """Every owner's counts summed by operator, in one pass."""
        tally = _Tally()
        calls, op_flops, uncounted = tally.calls, tally.op_flops, tally.uncounted
        for ops in self._by_owner.values():
            tally.flops += ops.flops
            tally.products += ops.product_flops
            for op, count in ops.counted_calls.items():
                calls[op] = calls.get(op, 0) + count
                op_flops[op] = op_flops.get(op, 0) + ops.op_flops.get(op, 0)
            if ops.uncounted_calls:
                for op, count in ops.uncounted_calls.items():
                    uncounted[op] = uncounted.get(op, 0) + count
            if ops.unclassified_calls:
                for op, count in ops.unclassified_calls.items():
                    tally.unclassified[op] = tally.unclassified.get(op, 0) + count
            for op, count in ops.ignored_calls.items():
                tally.ignored[op] = tally.ignored.get(op, 0) + count
        return tally

    def total(self, *, scope: str = "forward") -> MetricResult:
        return self._tally().total(scope)

    def product_total(self, *, scope: str = "forward") -> MetricResult:
        """The tensor-product share: complete only when the total is and every counted
        operator's share is known."""
        return self._tally().product_total(scope)

    def report(
        self, *, name: str | None = None, scope: str = "forward", module_rollup: bool = False
    ) -> FlopReport:
        """A FlopReport (method ``operator_dispatch``, unit ``FLOPs``) of what was counted.

        ``by_module`` holds one entry per owner key; with ``module_rollup`` each dotted key
        also receives the work of its dotted descendants (``a`` includes ``a.b``).
        """
        _check_name(name)
        tally = self._tally()
        calls, op_flops, uncounted, ignored = (
            tally.calls,
            tally.op_flops,
            tally.uncounted,
            tally.ignored,
        )
        by_operator: dict[str, OperatorCount] = {}
        for op in sorted({**calls, **uncounted}):
            flops = op_flops.get(op, 0)
            if op not in uncounted:
                result = MetricResult.complete(flops, unit=UNIT, scope=scope, method=METHOD)
            elif op in calls:
                result = MetricResult.partial(flops, unit=UNIT, scope=scope, method=METHOD)
            else:
                result = MetricResult.unavailable(unit=UNIT, scope=scope, method=METHOD)
            count = calls.get(op, 0) + uncounted.get(op, 0)  # typed: see the report below
            by_operator[op] = trusted_construct(OperatorCount, {"calls": count, "flops": result})
        diagnostics = self._uncounted_diagnostics(uncounted, "operator_flops") if uncounted else []
        if tally.unclassified:
            diagnostics += _unclassified_diagnostics(tally.unclassified)
        # every field is built typed here (MetricResults through their validating
        # constructors): pydantic would only check them again, thousands for by_module
        return trusted_construct(
            FlopReport,
            {
                "schema_version": SCHEMA_VERSION,
                "provenance": build_provenance(),
                "diagnostics": diagnostics,
                "kind": "flops",
                "name": name,
                "total": tally.total(scope),
                "product_flops": tally.product_total(scope),
                "by_operator": by_operator,
                "by_module": self._by_module(scope, module_rollup),
                "ignored_operators": [
                    trusted_construct(
                        IgnoredOperator,
                        {"operator": op, "calls": ignored[op], "reason": self.ignored_reason(op)},
                    )
                    for op in sorted(ignored)
                ],
                "workload_calls": 1,
                "conventions": {
                    "flop": BASE_CONVENTION,
                    "products": PRODUCTS_CONVENTION,
                    **CONVENTIONS,
                },
            },
        )

    def _by_module(self, scope: str, rollup: bool) -> dict[str, MetricResult]:
        sums: dict[str, list[int]] = {}  # key -> [flops, uncounted calls]
        for key, ops in self._by_owner.items():
            if key is not None:
                missing = sum(ops.uncounted_calls.values()) if ops.uncounted_calls else 0
                sums[key] = [ops.flops, missing]
        if rollup:
            _roll_up(sums)
        made: dict[tuple[int, bool], MetricResult] = {}  # repeated blocks repeat their sums
        out: dict[str, MetricResult] = {}
        for key, (flops, missing) in sorted(sums.items()):
            result = made.get((flops, missing == 0))
            if result is None:
                result = made[flops, missing == 0] = (
                    MetricResult.complete(flops, unit=UNIT, scope=scope, method=METHOD)
                    if missing == 0
                    else MetricResult.partial(flops, unit=UNIT, scope=scope, method=METHOD)
                )
            out[key] = result
        return out


def _check_name(name: object) -> None:
    if name is not None and not isinstance(name, str):
        raise TypeError(f"name must be a str or None, got {type(name).__name__} {name!r}")


@dataclass(slots=True)
class _Tally:
    """A counter's owners summed: totals, and calls / FLOPs per operator name."""

    flops: int = 0
    products: int = 0
    calls: dict[str, int] = field(default_factory=dict)
    op_flops: dict[str, int] = field(default_factory=dict)
    uncounted: dict[str, int] = field(default_factory=dict)
    unclassified: dict[str, int] = field(default_factory=dict)
    ignored: dict[str, int] = field(default_factory=dict)

    def total(self, scope: str) -> MetricResult:
        if self.uncounted:
            return MetricResult.partial(self.flops, unit=UNIT, scope=scope, method=METHOD)
        return MetricResult.complete(self.flops, unit=UNIT, scope=scope, method=METHOD)

    def product_total(self, scope: str) -> MetricResult:
        if self.uncounted or self.unclassified:
            return MetricResult.partial(self.products, unit=UNIT, scope=scope, method=METHOD)
        return MetricResult.complete(self.products, unit=UNIT, scope=scope, method=METHOD)


def _unclassified_diagnostics(calls: dict[str, int]) -> list[Diagnostic]:
    return [
        Diagnostic(
            code="unclassified_operator",
            severity="info",
            metric="product_flops",
            operator=name,
            count=calls[name],
            message=(
                f"{name} ran {calls[name]} time(s) with a formula from custom_mapping or "
                "torch's register_flop_formula that returned a plain count; how much of it "
                "is tensor products is unknown, so product_flops is a lower bound (the "
                "total is unaffected). Return Flops(products, other) from the formula "
                "(torchscan_stages.analysis.operators.Flops) to declare it."
            ),
        )
        for name in sorted(calls)
    ]


def _roll_up(sums: dict[str, list[int]]) -> None:
    """Add every dotted key's sums into its ancestors (``a`` gets ``a.b`` and ``a.b.c``).

    Deepest keys first, one parent step each: a key's sums are final before they are passed
    up, so the work is one addition per key rather than one per ancestor per key.
    """
    by_depth: dict[int, list[str]] = {}
    for key in sums:
        by_depth.setdefault(key.count("."), []).append(key)
    for depth in range(max(by_depth, default=0), 0, -1):
        for key in by_depth.get(depth, ()):
            parent = key.rpartition(".")[0]
            acc = sums.get(parent)
            if acc is None:
                acc = sums[parent] = [0, 0]
                by_depth.setdefault(depth - 1, []).append(parent)
            child = sums[key]
            acc[0] += child[0]
            acc[1] += child[1]


# ------------------------------------------------------------------------ module tracking


class StackOwner:
    """An ``owner`` that is the last key of a list its caller keeps (None when empty).

    The counter reads the list itself: no Python call per operator. measure_flops passes its
    module stack this way, the crawl its call keys; the caller pushes and pops keys in place
    (never rebinds the list).
    """

    __slots__ = ("stack",)

    def __init__(self, stack: list[OwnerKey]) -> None:
        self.stack = stack

    def __call__(self) -> OwnerKey | None:
        return self.stack[-1] if self.stack else None


class _ModuleStack:
    """Innermost running module, forward and (best effort) backward, by dotted name.

    Modelled on torch's ModuleTracker, but keeps an ordered stack so the innermost module is
    known in O(1). Names are ``RootClass.child.grandchild`` because ``measure_flops`` is not
    told which module is the root. Global hooks and gradient hooks are removed on exit.
    """

    def __init__(self) -> None:
        self.stack: list[str] = []
        # keyed by id(); ``_alive`` keeps each named module alive while the tracker is active,
        # so an id cannot be reused by another module (cleared on exit). ``_seen``: modules
        # whose subtree is named. (predict.modules.QualifiedModuleStack builds on both.)
        self._names: dict[int, str] = {}
        self._seen: set[int] = set()
        self._alive: list[torch.nn.Module] = []
        self._handles: list[Any] = []
        self._grad_handles: list[Any] = []
        self._callback_queued = False

    def current(self) -> str | None:
        stack = self.stack
        return stack[-1] if stack else None

    def _name(self, module: torch.nn.Module) -> str:
        """The module's dotted name; a module met first (a root) also names its subtree.

        The whole subtree is named at once (``named_modules``: a module registered twice keeps
        its first path), so modules inside containers that are never called themselves
        (``ModuleList``, ``ModuleDict``) still get their full path, and every later hook call
        is one set and one dict lookup.
        """
        key = id(module)
        names, seen = self._names, self._seen
        if key in seen:
            return names[key]
        name = names.get(key) or type(module).__name__
        alive = self._alive
        # _walk: named_modules' paths in its order, one loop instead of a generator per module
        for path, sub in named_modules(module, prefix=name):
            sub_key = id(sub)
            if sub_key not in names:
                names[sub_key] = path
                alive.append(sub)
            seen.add(sub_key)
        return name

    def _push(self, name: str) -> None:
        self.stack.append(name)

    def _pop(self, name: str) -> None:
        stack = self.stack
        if stack and stack[-1] == name:  # the common case: properly nested
            stack.pop()
            return
        for index in range(len(stack) - 1, -1, -1):
            if stack[index] == name:
                del stack[index]
                return

    def _backward_push(self, name: str) -> Callable[..., None]:
        def push(*_: Any) -> None:
            if not self._callback_queued:
                self._callback_queued = True
                torch.autograd.Variable._execution_engine.queue_callback(self._end_backward)
            self._push(name)

        return push

    def _backward_pop(self, name: str) -> Callable[..., None]:
        def pop(*_: Any) -> None:
            self._pop(name)

        return pop

    def _end_backward(self) -> None:
        self._callback_queued = False
        self.stack.clear()

    @staticmethod
    def _grad_tensors(value: Any) -> list[torch.Tensor]:
        flat, _ = torch.utils._pytree.tree_flatten(value)
        return [t for t in flat if isinstance(t, torch.Tensor) and t.requires_grad]

    def _pre_hook(self, module: torch.nn.Module, inputs: Any) -> None:
        # every named module is also seen (a subtree is named whole): one lookup per call
        name = self._names.get(id(module)) or self._name(module)
        self.stack.append(name)
        if _grad_enabled():
            tensors = self._grad_tensors(inputs)
            if tensors:
                self._grad_handles.append(
                    torch.autograd.graph.register_multi_grad_hook(tensors, self._backward_pop(name))
                )

    def _post_hook(self, module: torch.nn.Module, inputs: Any, output: Any) -> None:
        # every named module is also seen (a subtree is named whole): one lookup per call
        name = self._names.get(id(module)) or self._name(module)
        stack = self.stack
        if stack and stack[-1] == name:  # the common case: properly nested
            stack.pop()
        else:
            self._pop(name)
        if _grad_enabled():
            tensors = self._grad_tensors(output)
            if tensors:
                self._grad_handles.append(
                    torch.autograd.graph.register_multi_grad_hook(
                        tensors, self._backward_push(name)
                    )
                )

    def __enter__(self) -> _ModuleStack:
        from torch.nn.modules.module import (
            register_module_forward_hook,
            register_module_forward_pre_hook,
        )

        self._handles.append(register_module_forward_pre_hook(self._pre_hook))
        try:
            self._handles.append(register_module_forward_hook(self._post_hook, always_call=True))
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for handle in (*self._handles, *self._grad_handles):
            handle.remove()
        self._handles.clear()
        self._grad_handles.clear()
        self.stack.clear()
        self._names.clear()
        self._seen.clear()
        self._alive.clear()


# ------------------------------------------------------------------------------- public


def measure_flops(
    workload: Callable[[], Any],
    *,
    custom_mapping: Mapping[Any, Callable[..., int]] | None = None,
    strict: bool = False,
    name: str | None = None,
) -> FlopReport:
    """Call ``workload()`` once under operator dispatch and report its FLOPs.

    Forward, backward and optimizer steps inside the workload are all counted (scope
    ``workload``). An exception from the workload propagates unchanged; the dispatch mode and
    every hook are removed first. ``strict=True`` raises IncompleteAnalysisError (carrying the
    report) when any operator was uncounted.
    """
    report, _grad = count_workload(workload, custom_mapping=custom_mapping, name=name)
    if strict and not report.total.is_complete:
        raise IncompleteAnalysisError(report, ["total"])
    return report


def count_workload(
    workload: Callable[[], Any],
    *,
    custom_mapping: Mapping[Any, Callable[..., int]] | None = None,
    name: str | None = None,
) -> tuple[FlopReport, bool | None]:
    """measure_flops' pass, also returning the grad mode the workload's operators ran under
    (True if any ran with grad enabled; None if no operator ran): a workload owns its grad
    mode, and measure_workload records what it observed."""
    if not callable(workload):
        raise TypeError(f"workload must be a zero-argument callable, got {type(workload).__name__}")
    custom = classify_custom_mapping(custom_mapping)
    _check_name(name)
    tracker = _ModuleStack()
    counter = OperatorCounter(custom, owner=StackOwner(tracker.stack))
    with gc_paused():  # see _gc: keeps the per-module cost flat on large models
        with tracker, counter:
            output = workload()
        # a tensor or None is never deferred work: skip the generator / iterator checks
        plain = output is None or isinstance(output, torch.Tensor)
        lazy = None if plain else lazy_output_diagnostic(output, "operator_flops")
        del output
        report = counter.report(name=name, scope="workload", module_rollup=True)
    if counter.data_kind not in (_UNSEEN, None):
        report.diagnostics[:0] = without_data_diagnostics(counter.data_kind)
    _mark_no_work(report, lazy, _no_arithmetic(report))
    modes = counter.grad_modes
    return report, (True in modes) if modes else None


def _lower_bound(result: MetricResult) -> MetricResult:
    """What ran before the work was deferred: a lower bound, or nothing when that is 0."""
    known = result.known_value
    if known:
        return MetricResult.partial(
            known, unit=result.unit, scope=result.scope, method=result.method
        )
    return MetricResult.unavailable(unit=result.unit, scope=result.scope, method=result.method)


def _no_arithmetic(report: FlopReport) -> Diagnostic | None:
    """``empty_work`` when operators ran and the complete total is 0 (a batch of 0 gives it).

    Read off the finished count instead of a second dispatch mode beside the counter (which
    would add a dispatch frame to every operator): a zero total is the only case where the
    question arises.
    """
    total = report.total
    if total.status != "complete" or total.value != 0:
        return None
    calls = sum(entry.calls for entry in report.by_operator.values())
    calls += sum(entry.calls for entry in report.ignored_operators)
    if calls == 0:
        return None
    return Diagnostic(
        code="empty_work",
        severity="warning",
        metric="operator_flops",
        count=calls,
        message=f"all {calls} operator call(s) of the workload did no arithmetic: the complete "
        "0 FLOPs describe no work (a batch of 0 gives this; give the workload non-empty "
        "inputs); a workload that only moves data really does 0 FLOPs",
    )


def _mark_no_work(report: FlopReport, lazy: Diagnostic | None, empty: Diagnostic | None) -> None:
    """A lazy workload's counts are lower bounds (its work never ran); an empty one's are
    true for no work, and ``empty_work`` says so beside them."""
    if lazy is not None:
        report.total = _lower_bound(report.total)
        if report.product_flops is not None:
            report.product_flops = _lower_bound(report.product_flops)
        report.by_module = {key: _lower_bound(value) for key, value in report.by_module.items()}
        report.diagnostics.append(lazy)
    elif empty is not None:
        report.diagnostics.append(empty)
