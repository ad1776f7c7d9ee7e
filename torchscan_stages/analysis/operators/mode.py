"""The dispatch hook that records each operator against its owner (the hot path)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .fallbacks import without_kernel
from .lookup import _COUNTED, _DECOMPOSE, _IGNORED, _P_ALL, _P_NONE, _UNCOUNTED

if TYPE_CHECKING:
    from .counter import OperatorCounter


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
    # zero-FLOP operators with an elements-moved formula (operator_formulas.MOVED): their sum
    moved_elements: int = 0
    moved_calls: dict[str, int] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return not self.uncounted_calls


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
        if kind == _DECOMPOSE:
            with self:
                result = func.decompose(*args, **kwargs)
            if result is not NotImplemented:
                return result
            entry = counter._entries[id(func)] = (_UNCOUNTED, None, name, _P_NONE, call)
            kind = _UNCOUNTED
        try:
            out = call(*args, **kwargs)
        except (RuntimeError, NotImplementedError) as error:  # no cost unless raised
            out = without_kernel(func, args, kwargs, error, counter._owner_name())
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
            if formula is not None:  # the elements it moved (a module's own DMAs)
                try:
                    ops.moved_elements += formula(args, kwargs, out)  # type: ignore[operator]
                    ops.moved_calls[name] = ops.moved_calls.get(name, 0) + 1
                except Exception:  # not counted: the module's DMAs stay a lower bound
                    pass
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
_grad_enabled = torch.is_grad_enabled
_UNSEEN = "unseen"
