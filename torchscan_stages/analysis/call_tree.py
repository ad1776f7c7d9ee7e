"""The crawl's call tree: one :class:`Call` per module call, and each record's depth.

The hooks (``recorder``) fill a Call with cheap fields only; everything else is built from
the calls after the forward. A record's depth is its path's depth (the root ``""`` is 0,
``a.b`` is 2), except where a module is called again while it is still on the call stack (a
forward that calls itself, fvcore's ``RecursiveScopeNet``): that call is one level below the
call that made it, and everything inside it keeps the same offset. Paths alone cannot place
such a call, so the depth says it: the page and the consistency check read one root call,
the others nested.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from torch import nn

from ..report import ValueMeta
from .handlers import ModuleHandler


@dataclass(slots=True)
class Call:
    """One module call, filled by the hooks (cheap fields only; slots: built once per call)."""

    module: nn.Module
    path: str
    call_index: int
    parent: int | None
    handler: ModuleHandler | None
    key: str
    inputs: ValueMeta  # shared instances (to_value_meta's cache): the raw tuples die at once
    output: ValueMeta | None = None
    result: Any = None
    error: str | None = None
    children: list[int] | tuple[()] = ()  # a list once the call has a child
    inside_inclusive: bool = False


def path_depth(path: str) -> int:
    return 0 if not path else path.count(".") + 1


def _reentered(calls: Sequence[Any], i: int) -> bool:
    """Is call ``i``'s module one of its enclosing calls' modules?"""
    module = calls[i].module
    parent = calls[i].parent
    while parent is not None:
        if calls[parent].module is module:
            return True
        parent = calls[parent].parent
    return False


def call_depths(calls: Sequence[Any]) -> list[int]:
    """The depth of every call (parents precede their children in ``calls``)."""
    depths: list[int] = []
    offsets: list[int] = []
    for i, call in enumerate(calls):
        base = path_depth(call.path)
        parent = call.parent
        offset = offsets[parent] if parent is not None else 0
        if call.call_index and parent is not None and _reentered(calls, i):
            offset = max(offset, depths[parent] + 1 - base)
        offsets.append(offset)
        depths.append(base + offset)
    return depths
