"""One storage ledger: which tensor storages are live, each counted once, and when they go.

Both memory trackers count per storage, never per tensor view: the measured one
(``measure/memory.py``) and the predicted one (``predict/tracker.py``). They share this
bookkeeping: a storage is keyed by ``id()``, held through a weak reference whose callback
tells the owner when it is freed (a reused ``id`` is told apart by the reference), and a
storage that existed before the tracker saw it is remembered once, so it is never counted
as a new allocation later. What the bytes mean (device, phase, owner) is the owner's.
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
        self._before: dict[int, weakref.ref[Any]] = {}
        self._on_free = on_free

    def held(self, key: int, storage: Any) -> H | None:
        """The live entry of ``storage`` (``key`` is its id), or None."""
        entry = self.live.get(key)
        return entry if entry is not None and entry.ref() is storage else None

    def seen_before(self, key: int, storage: Any) -> bool:
        before = self._before.get(key)
        return before is not None and before() is storage

    def note_before(self, key: int, storage: Any) -> bool:
        """Remember a storage that existed before it was seen; True the first time."""
        if self.held(key, storage) is not None or self.seen_before(key, storage):
            return False
        self._before[key] = weakref.ref(storage)
        return True

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
