"""The counter: classifies operators, settles odd formula answers, builds the report parts."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from ...provenance import build_provenance
from ...report import (
    SCHEMA_VERSION,
    Diagnostic,
    FlopReport,
    IgnoredOperator,
    MetricResult,
    OperatorCount,
    trusted_construct,
)
from ..call_values import first_tensor
from ..model_forms import tensor_data_kind
from ..operator_formulas import CONVENTIONS, IGNORED, MOVED, Flops, RawFormula
from .lookup import (
    _COUNTED,
    _DECOMPOSE,
    _IGNORED,
    _IGNORED_REASONS,
    _NAMESPACE_REASONS,
    _P_ALL,
    _P_NONE,
    _P_SPLIT,
    _P_UNKNOWN,
    _UNCOUNTED,
    BASE_CONVENTION,
    METHOD,
    PRODUCTS_CONVENTION,
    UNIT,
    Entry,
    OwnerKey,
    _adapt_user_formula,
    _base_tables,
    classify_custom_mapping,
)
from .mode import _UNSEEN, OwnerOps, _CountingMode, _FormulaError
from .stack import StackOwner


def _whole_flops(value: Any) -> int:
    """A formula's answer as an int; a fractional or non-numeric answer is a broken formula.

    Truncating 2.5 to 2 would report a wrong number as complete; refusing it makes the
    operator uncounted with the formula's problem in the diagnostic instead.
    """
    if isinstance(value, bool) or str(getattr(value, "dtype", "")) in ("bool", "torch.bool"):
        # True is an int to Python (__index__ gives 1): never a count of 1 FLOP
        raise _FormulaError(f"returned a boolean {value!r}, expected an int count")
    if not isinstance(value, (int, float)):
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
        elif packet in IGNORED:  # zero FLOPs; the formula slot counts its elements moved
            self._ignored_reasons[name] = IGNORED[packet]
            entry = (_IGNORED, MOVED.get(packet), name, _P_NONE, call)
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
        first = first_tensor(args)
        if first is None:
            first = first_tensor(out)
        if first is not None:
            self.data_kind = tensor_data_kind(first)

    def _owner_name(self) -> str | None:
        """The innermost owner's key (a module path or call key), for an error."""
        stack = self._owner_stack
        if stack is not None:
            return stack[-1] if stack else None
        return self._owner() if self._owner is not None else None

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
                moved_elements=ops.moved_elements,
                moved_calls=dict(ops.moved_calls),
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
