"""Small tensors built from real inputs keep their values under prediction.

A fake tensor has a shape and no data, so a branch on data (``attention_mask.all()`` before
transformers skips its 4-D mask, generate's right-padding check, ``grid_thw.tolist()``)
either stops the fake run or, where a library asks "is this a FakeTensor?", takes the
tracing branch the real run does not take. But the data those branches read is rarely
computed by the model: it is the user's inputs (token ids, an attention mask, image grid
sizes), small buffers (position ids, rotary frequencies) and what small factory calls make
(``torch.ones``, ``torch.arange``). ``KnownValues`` keeps a real copy beside each such fake
tensor and runs every operator whose tensor inputs all have values once more on those values
(outside the fake mode, the real CPU kernel), so its outputs have values too. An operator
with a value-less input ends the chain (a matmul with fake weights: no value, as before); a
value-less write into a valued storage forgets that storage's values. Operators whose fake
kernel refuses because the result depends on data (``nonzero``, ``item``) are answered from
the values, and their outputs become fakes of the real results' shapes.

Bounded: a tensor carries a value only up to ``VALUE_LIMIT`` elements, and all values held
at once up to ``BUDGET_BYTES``; random operators and uninitialised ``empty`` never carry one.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.utils._python_dispatch import _disable_current_modes

from ..measure.ledger import storage_of

VALUE_LIMIT = 1 << 20  # elements of one tensor that may carry a value
BUDGET_BYTES = 64 << 20  # bytes of values held at once
_aten = torch.ops.aten
_FACTORIES = frozenset(
    {_aten.arange.default, _aten.arange.start, _aten.arange.start_step, _aten.ones.default,
     _aten.zeros.default, _aten.full.default, _aten.scalar_tensor.default,
     _aten.lift_fresh.default, _aten.lift_fresh_copy.default, _aten.linspace.default,
     _aten.eye.default, _aten.tril_indices.default, _aten.triu_indices.default}
)  # fmt: skip
# operators whose output values depend on their input's shape and dtype, not its data
_LIKE = frozenset(
    {_aten.ones_like.default, _aten.zeros_like.default, _aten.full_like.default,
     _aten.new_ones.default, _aten.new_zeros.default, _aten.new_full.default}
)  # fmt: skip
_NEVER = frozenset({torch.Tag.nondeterministic_seeded, torch.Tag.inplace_view})
_LIFT = frozenset({_aten.lift_fresh.default, _aten.lift_fresh_copy.default})


def _constant(tensor: Any) -> bool:
    return isinstance(tensor, FakeTensor) and tensor.constant is not None


def _tensors(tree: Any, into: list[torch.Tensor]) -> list[torch.Tensor]:
    if isinstance(tree, torch.Tensor):
        into.append(tree)
    elif isinstance(tree, (tuple, list)):
        for item in tree:
            _tensors(item, into)
    elif isinstance(tree, dict):
        for item in tree.values():
            _tensors(item, into)
    return into


def _map(tree: Any, leaf: Callable[[torch.Tensor], Any]) -> Any:
    if isinstance(tree, torch.Tensor):
        return leaf(tree)
    if isinstance(tree, (tuple, list)):
        return type(tree)(_map(item, leaf) for item in tree)
    if isinstance(tree, dict):
        return {key: _map(item, leaf) for key, item in tree.items()}
    return tree


_WRITES: dict[Any, tuple[tuple[int, str], ...]] = {}  # operator -> its written arguments


def _writes(func: Any) -> tuple[tuple[int, str], ...]:
    known = _WRITES.get(func)
    if known is None:
        schema = getattr(func, "_schema", None)
        known = tuple(
            (index, argument.name)
            for index, argument in enumerate(schema.arguments if schema is not None else ())
            if argument.alias_info is not None and argument.alias_info.is_write
        )
        _WRITES[func] = known
    return known


def _written(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[torch.Tensor]:
    """The tensor arguments ``func`` writes into (in-place and ``out=`` operators)."""
    written: list[torch.Tensor] = []
    for index, name in _writes(func):
        _tensors(args[index] if index < len(args) else kwargs.get(name), written)
    return written


@contextlib.contextmanager
def outside_modes() -> Iterator[None]:
    """Real tensors, really computed: no fake mode, no tracker (which would count the
    result and turn real inputs into fake copies), no autograd."""
    with _disable_current_modes(), torch.no_grad():
        yield


class KnownValues:
    """Real values beside fake tensors, for the small tensors made from real inputs."""

    def __init__(self, mode: FakeTensorMode) -> None:
        self.mode = mode
        self._values: dict[int, tuple[weakref.ref[torch.Tensor], int, torch.Tensor]] = {}
        self._by_storage: dict[int, set[int]] = {}
        self.held_bytes = 0
        self.answered: list[str] = []  # data-dependent operators answered from values

    # ------------------------------------------------------------------------- values
    def value_of(self, tensor: Any) -> torch.Tensor | None:
        """The real value of fake ``tensor``, if it carries one."""
        if not isinstance(tensor, FakeTensor):
            return None
        constant = tensor.constant
        if constant is not None:
            return constant
        known = self._values.get(id(tensor))
        if known is None or known[0]() is not tensor:
            return None
        return known[2]

    def learn(
        self, fake: torch.Tensor, real: torch.Tensor, *, copy: bool = True, constant: bool = False
    ) -> None:
        """``fake`` holds ``real``'s values (a private copy unless ``copy`` is False);
        ``constant``: a copy of the fake mode's own constant, refreshed."""
        if not isinstance(fake, FakeTensor) or (fake.constant is not None and not constant):
            return
        if isinstance(real, FakeTensor):
            return
        if copy and not constant and self.value_of(fake) is not None:
            return
        if real.numel() > VALUE_LIMIT or real.device.type != "cpu" or real.is_sparse:
            return
        nbytes = real.numel() * real.element_size()
        if self.held_bytes + nbytes > BUDGET_BYTES:
            return
        storage = storage_of(fake)
        if storage is None:
            return
        with outside_modes():
            value = real.detach().clone() if copy else real.detach()
        key, where = id(fake), id(storage)
        self.forget(key)
        self.held_bytes += nbytes
        self._values[key] = (weakref.ref(fake, lambda _: self.forget(key)), where, value)
        self._by_storage.setdefault(where, set()).add(key)

    def forget(self, key: int) -> None:
        known = self._values.pop(key, None)
        if known is None:
            return
        self.held_bytes -= known[2].numel() * known[2].element_size()
        keys = self._by_storage.get(known[1])
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._by_storage[known[1]]

    def _forget_storage(self, tensor: torch.Tensor) -> None:
        storage = storage_of(tensor)
        if storage is None:
            return
        for key in list(self._by_storage.get(id(storage), ())):
            self.forget(key)

    def _keep_aliases_of(self, tensor: torch.Tensor) -> None:
        """After a write through ``tensor``'s value: forget the values of other fakes on its
        storage whose values are separate copies (they did not see the write)."""
        value, storage = self.value_of(tensor), storage_of(tensor)
        if value is None or storage is None:
            return
        written = value.untyped_storage().data_ptr()
        for key in list(self._by_storage.get(id(storage), ())):
            if self._values[key][2].untyped_storage().data_ptr() != written:
                self.forget(key)

    # --------------------------------------------------------------------- operators
    def _inputs(self, func: Any, args: Any, kwargs: Any) -> tuple[Any, Any] | None:
        """``(args, kwargs)`` with every tensor replaced by its value, or None."""
        tensors = _tensors(kwargs, _tensors(args, []))
        if not tensors and func not in _FACTORIES:
            return None
        like = func in _LIKE
        missing = False

        def value(tensor: torch.Tensor) -> Any:
            nonlocal missing
            found = self.value_of(tensor) if isinstance(tensor, FakeTensor) else tensor
            if found is None and like:
                return torch.zeros(tensor.shape, dtype=tensor.dtype)
            if found is None or found.device.type != "cpu":
                missing = True
            return found

        real = (_map(args, value), _map(kwargs, value))
        return None if missing else real

    def _eligible(self, func: Any) -> bool:
        tags = getattr(func, "tags", ())
        return not any(tag in _NEVER for tag in tags) and "empty" not in str(func)

    def _real(self, func: Any, args: Any, kwargs: Any) -> Any:
        """``func`` on the values, or None when some input has none (or it fails)."""
        if not self._eligible(func):
            return None
        real = self._inputs(func, args, kwargs)
        if real is None:
            return None
        device = real[1].get("device")
        if device is not None and torch.device(device).type != "cpu":
            return None
        try:
            with outside_modes():
                return func(*real[0], **real[1])
        except Exception:  # the fake run goes on without values
            return None

    def follow(self, func: Any, args: Any, kwargs: Any, out: Any, inputs: Any = None) -> None:
        """After ``func`` ran on fakes: give its outputs values, or forget stale ones.
        ``inputs``: its tensor arguments, when the caller has them."""
        if inputs is not None and func not in _FACTORIES and func not in _LIFT:
            values = self._values
            if not any(id(t) in values or _constant(t) for t in inputs):
                if self._by_storage and _writes(func):  # a write may reach a valued storage
                    for tensor in _written(func, args, kwargs):
                        self._forget_storage(tensor)
                return  # no input has a value: neither has any output (the common case)
        written = _written(func, args, kwargs)
        outputs = _tensors(out, [])
        if any(_constant(t) for t in outputs):
            # the fake mode's own constant propagation ran it for real already; keep a copy,
            # since the fake mode drops a constant later (torch.tensor([2]) then .expand())
            for tensor in [*outputs, *written]:
                if isinstance(tensor, FakeTensor) and tensor.constant is not None:
                    self.learn(tensor, tensor.constant, constant=True)
                else:
                    self._forget_storage(tensor)
            return
        if not written and not any(isinstance(t, FakeTensor) for t in outputs):
            return
        if sum(t.numel() for t in outputs) > VALUE_LIMIT:
            real = None
        else:
            real = self._real(func, args, kwargs)
        if real is None:
            for tensor in written:  # a write without values: what the storage held is gone
                self._forget_storage(tensor)
            return
        reals = _tensors(real, [])
        if len(reals) != len(outputs):
            for tensor in written:
                self._forget_storage(tensor)
            return
        in_place = {id(t) for t in written}
        for tensor in written:
            self._keep_aliases_of(tensor)
        for fake, value in zip(outputs, reals, strict=True):
            if id(fake) in in_place and self.value_of(fake) is value:
                continue  # written in place through its own value: already up to date
            # a view's value is a view of its base's value, so writes reach both
            self.learn(fake, value, copy=False)

    def answer(self, func: Any, args: Any, kwargs: Any) -> tuple[bool, Any]:
        """A data-dependent operator the fake kernel refused: its result from the values
        (``(True, result)``, tensors as fakes of the real results) or ``(False, None)``."""
        real = self._real(func, args, kwargs)
        if real is None:
            return False, None
        self.answered.append(str(func))

        def fake_of(value: torch.Tensor) -> torch.Tensor:
            fake = self.mode.from_tensor(value)
            self.learn(fake, value, copy=False)
            return fake

        return True, _map(real, fake_of)
