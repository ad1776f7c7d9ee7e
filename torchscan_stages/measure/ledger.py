"""One storage ledger: which tensor storages are live, each counted once, and when they go.

Both memory trackers count per storage, never per tensor view: the measured one
(``measure/memory.py``) and the predicted one (``predict/tracker.py``). They share this
bookkeeping: a storage is keyed by ``id()``, held through a weak reference whose callback
tells the owner when it is freed (a reused ``id`` is told apart by the reference), and a
storage that existed before the tracker saw it is remembered once, so it is never counted
as a new allocation later. What the bytes mean (device, phase, owner) is the owner's.

A storage seen before keeps the size it had then: if it grows in place later (FSDP2 frees an
unsharded parameter with ``resize_(0)`` and re-grows the same storage each step; an ``out=``
operator resizes its output), the owner can count the growth as the call's allocation
(:meth:`StorageLedger.adopt`) instead of ignoring a storage it took for the baseline.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import torch


def storage_of(tensor: torch.Tensor) -> Any | None:
    """The tensor's storage, or None for tensors without one (e.g. sparse, some subclasses)."""
    try:
        return tensor.untyped_storage()
    except (RuntimeError, NotImplementedError, TypeError):
        return None


@dataclass(slots=True)
class Held:
    """One live storage: the weak reference that watches it and its counted bytes."""

    ref: weakref.ref[Any]
    nbytes: int


H = TypeVar("H", bound=Held)


class StorageLedger(Generic[H]):
    """Live storages by key, plus the storages seen before they could be counted."""

    def __init__(self, on_free: Callable[[int, H], None]) -> None:
        self.live: dict[int, H] = {}
        self._before: dict[int, tuple[weakref.ref[Any], int]] = {}  # key -> (ref, nbytes)
        self._on_free = on_free

    def held(self, key: int, storage: Any) -> H | None:
        """The live entry of ``storage`` (``key`` is its id), or None."""
        entry = self.live.get(key)
        return entry if entry is not None and entry.ref() is storage else None

    def seen_before(self, key: int, storage: Any) -> bool:
        before = self._before.get(key)
        return before is not None and before[0]() is storage

    def size_before(self, key: int, storage: Any) -> int | None:
        """The bytes a storage seen before had when it was noted (None: not seen before)."""
        before = self._before.get(key)
        return before[1] if before is not None and before[0]() is storage else None

    def note_before(self, key: int, storage: Any) -> bool:
        """Remember a storage that existed before it was seen; True the first time."""
        if self.held(key, storage) is not None or self.seen_before(key, storage):
            return False
        self._before[key] = (weakref.ref(storage), storage.nbytes())
        return True

    def adopt(self, key: int, storage: Any, make: Callable[[weakref.ref[Any]], H]) -> H:
        """Hold a storage that existed before (it grows or shrinks in place now): from here
        on it is live, its entry starting at the bytes the caller gives ``make``."""
        self._before.pop(key, None)
        return self.add(key, storage, make)

    def add(self, key: int, storage: Any, make: Callable[[weakref.ref[Any]], H]) -> H:
        """Hold a new storage: ``make`` builds its entry around the reference that watches it."""
        entry = make(weakref.ref(storage, functools.partial(self._freed, key)))
        self.live[key] = entry
        return entry

    def _freed(self, key: int, reference: weakref.ref[Any]) -> None:
        entry = self.live.get(key)
        if entry is None or entry.ref is not reference:
            return
        del self.live[key]
        self._on_free(key, entry)
