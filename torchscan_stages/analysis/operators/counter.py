"""The counter and its dispatch hook: each operator classified and counted against its owner.

One unit in one module: :class:`OperatorCounter` holds the state (the merged formula table,
the classifications, one :class:`~.tally.OwnerOps` per owner) and :class:`_CountingMode`, the
hook on torch's dispatch hot path, writes into that state directly. Classification and odd
formula answers are settled here; the report's sums, diagnostics and per-module results are
``tally``'s.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ...provenance import build_provenance
from ...report import (
    SCHEMA_VERSION,
    FlopReport,
    IgnoredOperator,
    MetricResult,
    OperatorCount,
    trusted_construct,
)
from ..call_values import first_tensor
from ..model_forms import tensor_data_kind
from ..operator_formulas import CONVENTIONS, IGNORED, MOVED, Flops, RawFormula
from .fallbacks import without_kernel
from .lookup import (
    BASE_CONVENTION,
    IGNORED_REASONS,
    METHOD,
    NAMESPACE_REASONS,
    OUTCOME_COUNTED,
    OUTCOME_DECOMPOSE,
    OUTCOME_IGNORED,
    OUTCOME_UNCOUNTED,
    PRODUCTS_CONVENTION,
    SHARE_ALL,
    SHARE_NONE,
    SHARE_SPLIT,
    SHARE_UNKNOWN,
    UNIT,
    Entry,
    OwnerKey,
    adapt_user_formula,
    base_tables,
    classify_custom_mapping,
)
from .stack import StackOwner
from .tally import (
    OwnerOps,
    by_module,
    check_name,
    tally,
    unclassified_diagnostics,
    uncounted_diagnostics,
)

# data_kind before the first operator is seen (then "real", "meta", "fake" or None)
UNSEEN = "unseen"
_grad_enabled = torch.is_grad_enabled


class _FormulaError(Exception):
    pass


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
            key: adapt_user_formula(fn)
            for key, fn in custom.items()
            if isinstance(key, torch._ops.OpOverload)
        }
        base = base_tables()
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
                self._table[key] = adapt_user_formula(fn)
                self._shares[key] = SHARE_UNKNOWN
        self._owner = owner
        # a StackOwner's list (measure_flops' module stack, the crawl's keys) is read directly
        # (no call per operator); it is only ever mutated in place, so this reference stays valid
        self._owner_stack: list[str] | None = None
        if type(owner) is StackOwner:
            self._owner_stack = owner.stack
        self._by_owner: dict[OwnerKey | None, OwnerOps] = {}
        self._ignored_reasons = IGNORED_REASONS
        self._uncounted_overloads: dict[str, set[str]] = {}
        self._formula_errors: dict[str, str] = {}
        self._mode: _CountingMode | None = None
        self._used = False
        self.grad_modes: set[bool] = set()  # grad mode of each recorded operator
        self.data_kind: str | None = UNSEEN  # "meta" / "fake": ran without data (model_forms)

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
            entry = (OUTCOME_COUNTED, self._custom_overloads[func], name, SHARE_UNKNOWN, call)
        elif packet in self._table:
            entry = (OUTCOME_COUNTED, self._table[packet], name, self._shares[packet], call)
        elif packet in IGNORED:  # zero FLOPs; the formula slot counts its elements moved
            self._ignored_reasons[name] = IGNORED[packet]
            entry = (OUTCOME_IGNORED, MOVED.get(packet), name, SHARE_NONE, call)
        elif func.namespace in NAMESPACE_REASONS:
            self._ignored_reasons[name] = NAMESPACE_REASONS[func.namespace]
            entry = (OUTCOME_IGNORED, None, name, SHARE_NONE, call)
        elif torch._C.DispatchKey.CompositeImplicitAutograd in func.py_kernels or (
            torch._C._dispatch_has_kernel_for_dispatch_key(
                func.name(), torch._C.DispatchKey.CompositeImplicitAutograd
            )
        ):
            entry = (OUTCOME_DECOMPOSE, None, name, SHARE_NONE, call)
        else:
            entry = (OUTCOME_UNCOUNTED, None, name, SHARE_NONE, call)
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
            if type(value) is Flops and share in (SHARE_SPLIT, SHARE_UNKNOWN):
                share = SHARE_SPLIT  # a user formula that declares its share
                products = _whole_flops(value.products)
                flops = products + _whole_flops(value.other)
            elif share == SHARE_SPLIT:
                raise _FormulaError(f"returned {value!r}, expected Flops(products, other)")
            else:
                flops = _whole_flops(value)
                products = flops if share == SHARE_ALL else 0
            if products < 0 or flops < products:  # a negative part of either kind
                raise _FormulaError(f"negative FLOPs ({value!r})")
        except Exception as error:
            self._formula_failed(func, name, ops, error)
            return
        ops.flops += flops
        ops.product_flops += products
        ops.counted_calls[name] = ops.counted_calls.get(name, 0) + 1
        ops.op_flops[name] = ops.op_flops.get(name, 0) + flops
        if share == SHARE_UNKNOWN:
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

    def total(self, *, scope: str = "forward") -> MetricResult:
        return tally(self._by_owner.values()).total(scope)

    def report(
        self, *, name: str | None = None, scope: str = "forward", module_rollup: bool = False
    ) -> FlopReport:
        """A FlopReport (method ``operator_dispatch``, unit ``FLOPs``) of what was counted.

        ``by_module`` holds one entry per owner key; with ``module_rollup`` each dotted key
        also receives the work of its dotted descendants (``a`` includes ``a.b``).
        """
        check_name(name)
        sums = tally(self._by_owner.values())
        calls, op_flops, uncounted, ignored = (
            sums.calls,
            sums.op_flops,
            sums.uncounted,
            sums.ignored,
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
        diagnostics = (
            uncounted_diagnostics(
                uncounted, "operator_flops", self._uncounted_overloads, self._formula_errors
            )
            if uncounted
            else []
        )
        if sums.unclassified:
            diagnostics += unclassified_diagnostics(sums.unclassified)
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
                "total": sums.total(scope),
                "product_flops": sums.product_total(scope),
                "by_operator": by_operator,
                "by_module": by_module(self._by_owner, scope, module_rollup),
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


class _CountingMode(TorchDispatchMode):
    """The dispatch hook; all state lives on the owning :class:`OperatorCounter`.

    This is the hot path: one Python frame per dispatched operator plus its formula's. The
    operator runs through ``OpOverload._op`` (what ``OpOverload.__call__`` calls, one frame
    less), the owner is read off the module stack without a call, and an ignored operator or
    a formula answering a plain non-negative int is recorded inline; anything else (a
    ``Flops`` split, a float, an error, a custom formula) takes :meth:`OperatorCounter._settle`.
    It reads and writes the counter's private state: the two are one unit, kept in one module.
    """

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # torch wraps every subclass's __torch_dispatch__ in torch._dynamo.disable (two
        # more Python frames and four eval-frame swaps per operator, about a quarter of the
        # dispatch floor's overhead). The wrapper keeps Dynamo from tracing the handler;
        # never_compiled does the same on the code object, so a workload that compiles and
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
        if kind == OUTCOME_DECOMPOSE:
            with self:
                result = func.decompose(*args, **kwargs)
            if result is not NotImplemented:
                return result
            entry = counter._entries[id(func)] = (OUTCOME_UNCOUNTED, None, name, SHARE_NONE, call)
            kind = OUTCOME_UNCOUNTED
        try:
            out = call(*args, **kwargs)
        except (RuntimeError, NotImplementedError) as error:  # no cost unless raised
            out = without_kernel(func, args, kwargs, error, counter._owner_name())
        if counter.data_kind is UNSEEN:  # first operator only: real, meta or fake tensors?
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
        if kind == OUTCOME_IGNORED:
            ops.ignored_calls[name] = ops.ignored_calls.get(name, 0) + 1
            if formula is not None:  # the elements it moved (a module's own DMAs)
                try:
                    ops.moved_elements += formula(args, kwargs, out)  # type: ignore[operator]
                    ops.moved_calls[name] = ops.moved_calls.get(name, 0) + 1
                except Exception:  # not counted: the module's DMAs stay a lower bound
                    pass
        elif kind == OUTCOME_COUNTED:
            try:
                value = formula(args, kwargs, out)  # type: ignore[misc]
            except Exception as error:  # a broken formula must not break the workload
                counter._formula_failed(func, name, ops, error)
                return out
            if type(value) is int and value >= 0 and share <= SHARE_ALL:
                ops.flops += value
                if share == SHARE_ALL:
                    ops.product_flops += value
                ops.counted_calls[name] = ops.counted_calls.get(name, 0) + 1
                ops.op_flops[name] = ops.op_flops.get(name, 0) + value
            else:
                counter._settle(func, name, share, value, ops)
        else:
            counter._uncounted_overloads.setdefault(name, set()).add(str(func))
            ops.uncounted_calls[name] = ops.uncounted_calls.get(name, 0) + 1
        return out


def never_compiled(code: Any) -> None:
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


never_compiled(_CountingMode.__torch_dispatch__.__code__)
