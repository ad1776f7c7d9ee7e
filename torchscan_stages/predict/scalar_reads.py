"""Scalar reads no allocation depends on do not stop the prediction.

``loss.item()`` logged after ``optimizer.step()``, Adafactor's ``norm().item()`` (a step
size), a GradScaler's ``found_inf.item()``: a fake tensor computed by the model has no value,
so the read used to stop the fake run (``partial``, though every byte was seen). A read of
a floating value with no known value now returns a :class:`ReadFloat`: a ``float`` (NaN)
that carries the line that read it through arithmetic, and stops the run only where its
value would choose what happens next:

* a comparison or ``bool()`` in the user's code (``if loss < best:``), or a conversion to
  an integer (``int()``, ``round()``, an index or a size): the run stops there, ``partial``,
  the diagnostic naming the read and the use;
* a comparison inside ``max()`` / ``min()`` (Adafactor's ``max(eps2, rms)``) picks the read
  value, so the result still carries it (a value, not a branch);
* GradScaler's "were there infs?" (``torch.amp.GradScaler._maybe_opt_step``) is answered
  "no": the optimizer steps, the run every healthy step takes (an assumption, listed);
* generate's EOS check (``EosTokenCriteria``) is answered "no sequence emitted EOS": the
  run goes to ``max_new_tokens``, the longest (and largest) generation; a warning says so;
* a LayerDrop draw (``if torch.rand([]) < self.layerdrop``, BART-family encoders and
  decoders in training) is answered "kept": the most memory a step can need; a warning.

Integer and boolean reads of unknown values stop the run as before (they are sizes, indices
and branches). Reads of known values (constants, and small tensors made from real inputs:
``values.py``) return the real value. ``.numpy()`` of a fake tensor returns the known value
or stops the run with a diagnostic, never a raw exception. What is not followed: a ``math``
function or C code that reads the float directly (``math.isfinite(x)``) sees NaN.
"""

from __future__ import annotations

import dis
import linecache
import math
import sys
from dataclasses import dataclass, field
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch.overrides import TorchFunctionMode

from ..analysis.operators import never_compiled
from ..report import Diagnostic
from .stops import FakeRunStopped, UnknownValueUsed, user_line
from .values import KnownValues, outside_modes

_CALLS = frozenset(dis.opmap[name] for name in ("CALL", "PRECALL", "CALL_FUNCTION_EX")
                   if name in dis.opmap)  # fmt: skip


@dataclass(eq=False)
class ReadLog:
    """The scalar reads of a run, and the branches answered on an assumption."""

    reads: dict[str, int] = field(default_factory=dict)  # line -> reads continued
    assumed: dict[str, str] = field(default_factory=dict)  # what was assumed -> line

    def read(self, line: str) -> None:
        self.reads[line] = self.reads.get(line, 0) + 1

    def diagnostics(self) -> list[Diagnostic]:
        found: list[Diagnostic] = []
        if self.reads:
            lines = "; ".join(f"{line} ({n}x)" for line, n in self.reads.items())
            found.append(
                Diagnostic(
                    code="scalar_read",
                    severity="info",
                    metric="peak",
                    count=sum(self.reads.values()),
                    message="values read from computed tensors (.item(), .tolist(), float()) "
                    f"at {lines} went on as NaN placeholders: where no size, index or branch "
                    "uses them they change no allocation (a read that one uses stops the run, "
                    "fake_unsupported_operator)",
                )
            )
        for what, line in self.assumed.items():
            found.append(
                Diagnostic(
                    code="branch_assumed_by_rule",
                    severity="warning" if what in _WARNED else "info",
                    metric="peak",
                    message=f"a branch on a computed value was answered by rule at {line}: {what}",
                )
            )
        return found

    def assumptions(self) -> list[str]:
        return list(self.assumed)


_SCALER_FINITE = (
    "GradScaler: gradients assumed finite, so the optimizer steps (the step every healthy "
    "iteration takes; a step with inf/NaN gradients skips the optimizer and needs less)"
)
_EOS_NEVER = (
    "generate: no sequence is assumed to emit EOS, so generation runs to max_new_tokens "
    "(the longest run, and the largest KV cache); a generation that stops earlier needs "
    "at most this"
)


_LAYER_KEPT = (
    "LayerDrop: every layer is assumed kept (the draw is random; a step that drops layers "
    "needs less), so this is the most memory a training step can take"
)


_WARNED = (_EOS_NEVER, _LAYER_KEPT)  # assumptions that can put the figure above a real step


def _code_of(qualified: str, attribute: str) -> Any:
    """The code object of a library function, if its module is imported (never imports)."""
    module_name, _, class_name = qualified.rpartition(".")
    owner = getattr(sys.modules.get(module_name), class_name, None)
    function = getattr(owner, attribute, None)
    return getattr(function, "__code__", None)


def _caller() -> Any:
    """The innermost Python frame outside this module."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back  # type: ignore[assignment]
    return frame


def _where(frame: Any) -> str:
    return f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame is not None else "?"


class ReadFloat(float):
    """A float read from a fake tensor whose value is unknown: NaN that remembers the read."""

    log: ReadLog
    line: str

    def __new__(cls, log: ReadLog, line: str) -> ReadFloat:
        value = super().__new__(cls, math.nan)
        value.log, value.line = log, line
        return value

    def _carry(self, result: Any) -> Any:
        return ReadFloat(self.log, self.line) if isinstance(result, float) else result

    def _use(self, how: str) -> FakeRunStopped:
        where = _where(_caller())
        error = UnknownValueUsed(
            f"the value read at {self.line} is not known to the fake run and was used "
            f"{how} at {where}"
        )
        return FakeRunStopped(f"value read at {self.line}", None, where, error)

    def _selecting(self) -> bool:
        """Called from C code (max(), min(), sorted()) rather than a branch of Python code."""
        frame = _caller()
        return frame is not None and frame.f_code.co_code[frame.f_lasti] in _CALLS

    def _compare(self, other: Any, wins: bool) -> bool:
        if self._selecting():
            return wins  # inside max()/min(): pick the read value, which keeps its line
        raise self._use("in a comparison (a branch)")

    def __lt__(self, other: Any) -> bool:
        return self._compare(other, True)

    def __le__(self, other: Any) -> bool:
        return self._compare(other, True)

    def __gt__(self, other: Any) -> bool:
        return self._compare(other, True)

    def __ge__(self, other: Any) -> bool:
        return self._compare(other, True)

    def __bool__(self) -> bool:
        frame = _caller()
        scaler = _code_of("torch.amp.grad_scaler.GradScaler", "_maybe_opt_step")
        if frame is not None and scaler is not None and frame.f_code is scaler:
            self.log.assumed.setdefault(_SCALER_FINITE, _where(frame))
            return False  # the sum of found_inf is 0: no inf, the optimizer steps
        raise self._use("as a truth value (a branch)")

    def __int__(self) -> int:
        raise self._use("as an integer (a size or an index)")

    def __index__(self) -> int:
        raise self._use("as an index")

    def __round__(self, ndigits: Any = None) -> Any:
        raise self._use("in round()")

    def __trunc__(self) -> int:
        raise self._use("in math.trunc()")

    def __floor__(self) -> int:
        raise self._use("in math.floor()")

    def __ceil__(self) -> int:
        raise self._use("in math.ceil()")

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other: object) -> bool:
        if self._selecting() or other is self:
            return other is self  # a container lookup, not a branch
        raise self._use("in an equality test (a branch)")

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)


def _arithmetic(name: str) -> Any:
    base = getattr(float, name)

    def method(self: ReadFloat, *args: Any) -> Any:
        result = base(self, *args)
        return NotImplemented if result is NotImplemented else self._carry(result)

    method.__name__ = name
    return method


for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
              "__truediv__", "__rtruediv__", "__floordiv__", "__rfloordiv__", "__mod__",
              "__rmod__", "__pow__", "__rpow__", "__neg__", "__pos__", "__abs__"):  # fmt: skip
    setattr(ReadFloat, _name, _arithmetic(_name))


def _nested(shape: tuple[int, ...], leaf: Any) -> Any:
    if not shape:
        return leaf()
    return [_nested(shape[1:], leaf) for _ in range(shape[0])]


_HANDLED: dict[Any, str] = {
    torch.Tensor.item: "read", torch.Tensor.tolist: "read", torch.Tensor.__float__: "read",
    torch.Tensor.numpy: "numpy", torch.Tensor.__array__: "numpy", torch.isin: "isin",
    torch.tensor: "literal", torch.as_tensor: "literal", torch.Tensor.__bool__: "bool",
}  # fmt: skip


@dataclass(eq=False)
class ScalarReads(TorchFunctionMode):
    """Reads of fake tensors: known values for real, unknown floats as ReadFloat."""

    values: KnownValues
    modules: Any  # the module stack, for a stop's module path
    log: ReadLog = field(default_factory=ReadLog)

    def __post_init__(self) -> None:
        super().__init__()

    def _unknown(self, tensor: Any) -> bool:
        return isinstance(tensor, FakeTensor) and self.values.value_of(tensor) is None

    def __torch_function__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        kwargs = kwargs or {}
        handled = _HANDLED.get(func)
        if handled is None:  # nearly every call: one dict lookup
            return func(*args, **kwargs)
        target = args[0] if args else None
        if handled == "read" and isinstance(target, FakeTensor):
            if target.dtype.is_floating_point and self._unknown(target):
                return self._read(target, func.__name__)
        elif handled == "numpy" and isinstance(target, FakeTensor):
            return self._numpy(target, func.__name__)
        elif handled == "isin":
            return self._isin(func, args, kwargs)
        elif handled == "literal" and isinstance(target, (list, tuple)):
            return func(self._literal(target), *args[1:], **kwargs)
        elif handled == "bool" and self._unknown(target) and self._layer_drop():
            return False  # the layer is kept: the most memory a step can need
        return func(*args, **kwargs)

    def _layer_drop(self) -> bool:
        """A LayerDrop draw (``if torch.rand([]) < self.layerdrop: continue``): random, so
        unknowable; answered "kept" by rule, listed (the step then needs the most memory
        any draw can)."""
        frame = _caller()
        if frame is None:
            return False
        line = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
        if "layerdrop" not in line.lower():
            return False
        self.log.assumed.setdefault(_LAYER_KEPT, _where(frame))
        return True

    def _literal(self, data: Any) -> Any:
        """``torch.tensor([t1, t2])`` reads its elements' data directly (no operator), which
        a fake tensor does not have: each element is replaced by its known value, or the
        run stops here, saying so."""
        if isinstance(data, (list, tuple)):
            return type(data)(self._literal(item) for item in data)
        if not isinstance(data, FakeTensor):
            return data
        value = self.values.value_of(data)
        if value is None:
            error = UnknownValueUsed(
                "torch.tensor() of a list holding a tensor whose value the fake run does not have"
            )
            raise FakeRunStopped("torch.tensor", self.modules.current(), user_line(), error)
        return value.tolist()

    def _read(self, tensor: torch.Tensor, name: str) -> Any:
        line = user_line() or "?"
        if name == "tolist":
            self.log.read(line)
            return _nested(tuple(tensor.shape), lambda: ReadFloat(self.log, line))
        if tensor.numel() != 1:  # what the real call raises
            raise RuntimeError(
                f"a Tensor with {tensor.numel()} elements cannot be converted to Scalar"
            )
        self.log.read(line)
        return ReadFloat(self.log, line)

    def _numpy(self, tensor: torch.Tensor, name: str) -> Any:
        value = self.values.value_of(tensor)
        if value is not None:
            return value.detach().numpy().copy()
        error = UnknownValueUsed(
            f"Tensor.{name}() of a tensor whose values the fake run does not have"
        )
        raise FakeRunStopped(f"Tensor.{name}", self.modules.current(), user_line(), error)

    def _isin(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        out = func(*args, **kwargs)
        frame = _caller()
        eos = _code_of("transformers.generation.stopping_criteria.EosTokenCriteria", "__call__")
        if (
            eos is not None
            and frame is not None
            and frame.f_code is eos
            and self._unknown(out)
            and isinstance(out, torch.Tensor)
        ):
            self.log.assumed.setdefault(_EOS_NEVER, _where(frame))
            with outside_modes():
                never = torch.zeros(tuple(out.shape), dtype=torch.bool)
            self.values.learn(out, never, copy=False)
        return out


never_compiled(ScalarReads.__torch_function__.__code__)
