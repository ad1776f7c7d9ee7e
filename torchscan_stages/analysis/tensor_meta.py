"""Cheap capture of call inputs/outputs inside hooks, turned into ValueMeta afterwards.

Hooks run on the hot path, so they keep plain tuples; pydantic models are built once the
forward has finished. Only metadata is kept (shape, dtype, device, requires_grad), never values.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import torch

from ..report import ValueMeta

RawMeta = tuple[Any, ...]


MAX_NESTING = 64
"""Containers nested deeper than this are described by their type only (no recursion)."""


def capture(value: Any) -> RawMeta:
    """Recursive metadata of a value as nested tuples (no tensor is kept alive).

    A container that contains itself, or nesting deeper than MAX_NESTING, is described as
    ``("other", "<type> (recursive)")`` / ``("other", "<type> (nested too deep)")``.
    """
    if isinstance(value, torch.Tensor):  # the common cases first: a tensor, a tuple of them
        return ("tensor", tuple(value.shape), value.dtype, value.device, value.requires_grad)
    if type(value) is tuple and all(isinstance(v, torch.Tensor) for v in value):
        return ("tuple", None, tuple(capture(v) for v in value))
    return _capture(value, set(), 0)


def _capture(value: Any, active: set[int], depth: int) -> RawMeta:
    if isinstance(value, torch.Tensor):
        return ("tensor", tuple(value.shape), value.dtype, value.device, value.requires_grad)
    if value is None:
        return ("none",)
    if isinstance(value, (bool, int, float, complex, str)):
        return ("scalar", type(value).__name__)
    if not isinstance(value, (tuple, list, dict)):
        return _object(value, active, depth)
    if id(value) in active:
        return ("other", f"{type(value).__name__} (recursive)")
    if depth >= MAX_NESTING:
        return ("other", f"{type(value).__name__} (nested too deep)")
    active.add(id(value))
    try:
        if isinstance(value, dict):
            items = tuple(_capture(v, active, depth + 1) for v in value.values())
            return ("dict", tuple(str(k) for k in value), items)
        inner = tuple(_capture(v, active, depth + 1) for v in value)
        if isinstance(value, tuple):
            if type(value) is tuple:
                return ("tuple", None, inner)
            fields = getattr(type(value), "_fields", None)  # a named tuple: its field names
            if isinstance(fields, tuple) and len(fields) == len(inner):
                return ("tuple", type(value).__name__, inner, tuple(map(str, fields)))
            return ("tuple", type(value).__name__, inner)
        return ("list", None, inner)
    finally:
        active.discard(id(value))


MAX_ATTRIBUTES = 64
"""Attributes of an object output looked at (the first ones of its ``__dict__``)."""


def _attributes(value: Any) -> list[tuple[str, Any]]:
    """(name, value) of an object's fields: a dataclass's, else its public ``__dict__``
    entries (a distribution's ``loc``/``scale``/``logits``); read as stored, never computed
    (a lazy property not yet evaluated is not there, and is not evaluated)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        names = [f.name for f in dataclasses.fields(value)][:MAX_ATTRIBUTES]
        stored = getattr(value, "__dict__", None)
        if isinstance(stored, dict):
            return [(n, stored[n]) for n in names if n in stored]
        return [(n, getattr(value, n, None)) for n in names]  # slots: member descriptors
    stored = getattr(value, "__dict__", None)
    if type(stored) is not dict:  # a class, a module object (mappingproxy), __slots__ only
        return []
    found = []
    for name, item in stored.items():
        if isinstance(name, str) and not name.startswith("_"):
            found.append((name, item))
            if len(found) >= MAX_ATTRIBUTES:
                break
    return found


def _holds_tensor(raw: RawMeta) -> bool:
    if raw[0] == "tensor":
        return True
    return len(raw) > 2 and any(_holds_tensor(item) for item in raw[2])


def _object(value: Any, active: set[int], depth: int) -> RawMeta:
    """An object output (a distribution, a dataclass, an object holding tensors): its type,
    and the tensors it holds by attribute name (``("other", name, items, keys)``)."""
    name = type(value).__name__
    if id(value) in active or depth >= MAX_NESTING:
        return ("other", name)
    attributes = _attributes(value)
    if not attributes:
        return ("other", name)
    active.add(id(value))
    try:
        keys, items = [], []
        for key, attribute in attributes:
            raw = _capture(attribute, active, depth + 1)
            if _holds_tensor(raw):
                keys.append(key)
                items.append(raw)
    finally:
        active.discard(id(value))
    return ("other", name, tuple(items), tuple(keys)) if keys else ("other", name)


def call_capture(args: tuple[Any, ...], kwargs: dict[str, Any]) -> RawMeta:
    """Inputs of a call: the args tuple, with kwargs beside it when there are any."""
    if not kwargs:
        return capture(args)
    return ("dict", ("args", "kwargs"), (capture(args), capture(kwargs)))


_NAMES: dict[Any, str] = {}


def _name(value: torch.dtype | torch.device) -> str:
    """str() of a dtype/device, cached (called once per tensor in every record)."""
    name = _NAMES.get(value)
    if name is None:
        name = _NAMES[value] = str(value).removeprefix("torch.")
    return name


@functools.lru_cache(maxsize=1 << 14)
def to_value_meta(raw: RawMeta) -> ValueMeta:
    """Build the wire model from a captured tuple.

    Cached: ValueMeta is frozen, and the same shapes recur across the layers of a model, so
    equal captures share one instance instead of building thousands of equal objects.
    """
    kind = raw[0]
    if kind == "tensor":
        _, shape, dtype, device, requires_grad = raw
        return _build(
            kind="tensor",
            shape=list(shape),
            dtype=_name(dtype),
            device=_name(device),
            requires_grad=requires_grad,
        )
    if kind in ("tuple", "list"):
        items = [to_value_meta(v) for v in raw[2]]
        if len(raw) > 3:  # a named tuple's fields
            return _build(kind=kind, type_name=raw[1], items=items, keys=list(raw[3]))
        return _build(kind=kind, type_name=raw[1], items=items)
    if kind == "dict":
        return _build(kind="dict", keys=list(raw[1]), items=[to_value_meta(v) for v in raw[2]])
    if kind == "none":
        return _build(kind="none")
    if len(raw) > 2:  # an object holding tensors: by attribute name
        items = [to_value_meta(v) for v in raw[2]]
        return _build(kind=kind, type_name=raw[1], items=items, keys=list(raw[3]))
    return _build(kind=kind, type_name=raw[1])


# The memos of meta_of and call_meta sit in front of to_value_meta's cache; each is kept for
# what ``bench_crawl.py --scaffolding`` shows (process CPU time, median over 7 rounds on 2
# shared cores under load average 12-25): without meta_of's, a 5,000-block crawl costs 1.23x
# (the Transformer 1.02x); without call_meta's 1.10x (Transformer 0.97x, noise). A 3-round run
# under the same load gave 0.97x-1.14x: the saving is real on many small layers only.
_TENSORS: dict[tuple[Any, ...], ValueMeta] = {}
_SINGLE_ARGS: dict[tuple[Any, ...], ValueMeta] = {}
_MEMO_LIMIT = 1 << 12


def meta_of(value: Any) -> ValueMeta:
    """``to_value_meta(capture(value))``, with a dict in front for the two hot cases.

    A tensor (a module's output) and a one-tensor args tuple (its input) are keyed by
    (shape, dtype, device, requires_grad) alone: one small tuple and one lookup per hook
    instead of a nested capture hashed into the cache.
    """
    if isinstance(value, torch.Tensor):
        key = (value.shape, value.dtype, value.device, value.requires_grad)
        memo = _TENSORS
    elif type(value) is tuple and len(value) == 1 and isinstance(value[0], torch.Tensor):
        t = value[0]
        key = (t.shape, t.dtype, t.device, t.requires_grad)
        memo = _SINGLE_ARGS
    else:
        return to_value_meta(capture(value))
    meta = memo.get(key)
    if meta is None:
        raw: RawMeta = ("tensor", tuple(key[0]), *key[1:])
        meta = to_value_meta(raw if memo is _TENSORS else ("tuple", None, (raw,)))
        if len(memo) >= _MEMO_LIMIT:
            memo.clear()
        memo[key] = meta
    return meta


_CALLS: dict[tuple[Any, ...], ValueMeta] = {}
_SCALARS = frozenset({bool, int, float, complex, str, type(None)})


def call_meta(args: tuple[Any, ...], kwargs: dict[str, Any]) -> ValueMeta:
    """``to_value_meta(call_capture(args, kwargs))``, keyed flat when every argument is a
    tensor, None or a plain scalar (a layer called with keyword masks and flags): one tuple
    and one lookup instead of a nested capture hashed into the cache. Anything else (a
    container, an object) takes the plain path."""
    parts: list[Any] = [len(args), tuple(kwargs)]
    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor):
            parts.append((value.shape, value.dtype, value.device, value.requires_grad))
        elif type(value) in _SCALARS:
            parts.append(type(value))  # what capture keeps of a scalar: its type
        else:
            return to_value_meta(call_capture(args, kwargs))
    key = tuple(parts)
    meta = _CALLS.get(key)
    if meta is None:
        meta = to_value_meta(call_capture(args, kwargs))
        if len(_CALLS) >= _MEMO_LIMIT:
            _CALLS.clear()
        _CALLS[key] = meta
    return meta


def _build(**fields: Any) -> ValueMeta:
    """ValueMeta without re-validation: every field here is built from typed metadata."""
    return ValueMeta.model_construct(**fields)
