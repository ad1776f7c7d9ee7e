"""First step and steady state of a training step: derived from one fake run, or measured on a
second call of the same step.

A fresh optimizer creates its state (AdamW: ``exp_avg``, ``exp_avg_sq``, ``step``) inside its
first ``step()``; from the second step on that state exists through the whole forward and
backward pass, and so does everything else the first step leaves alive for the next one:
gradients kept by ``zero_grad(set_to_none=False)``, a GradScaler's scale and growth tracker,
an accumulator. Two ways to the steady-state peak:

* **Measured** (the step reaches resident parameters: a model built outside the workload):
  the workload is called a second time on the same fake copies, so the second call starts
  with whatever the first left alive (state, kept gradients, the scaler's fakes); its peak
  is the steady state, exactly. The first call's figures stay the report's ``peak``.
* **Derived** (everything built inside the workload, so a second call would build it all
  again): every byte change of the run is recorded with its storage. The kept set ``K`` is
  the storages in ``optimizer.state`` when the first step ends plus the storages made before
  it ended that are written in place after it (``zero_grad(set_to_none=False)`` zeroing the
  gradients, ``GradScaler.update`` writing its scale). The steady state replays the run up
  to the step's end with ``K`` live from the start and its creations skipped, and takes the
  larger of that and what the run saw after the step (the state is already there). A kept
  gradient is the exception: a second step's backward still allocates the incoming gradient
  and frees it once it is added into the kept one, so its creation counts until its
  accumulation (a gradient with no accumulation event, FSDP2's sharded one, counts until the
  step: a bound, said by a diagnostic).

An optimizer whose state exists before the run (built and stepped outside) makes the run a
steady-state step itself; its first-step peak is then not predicted.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from .ownership import _key as storage_key


def _written_arguments(func: Any) -> tuple[int, ...]:
    """Positions of the arguments an operator writes in place (``Tensor(a!)``), by schema."""
    try:
        arguments = func._schema.arguments
    except AttributeError:
        return ()
    return tuple(
        i for i, a in enumerate(arguments) if a.alias_info is not None and a.alias_info.is_write
    )


@dataclass(slots=True)
class SteadyState:
    """The byte timeline of a run up to a fresh optimizer's first step's end, and what it
    implies; or the second call's measured peak."""

    resident_keys: Any = None  # storage keys of resident (fake-copied) tensors, or None
    resident_state: bool = False  # an optimizer stepped with state from before the run
    extra_fresh_steps: int = 0  # later fresh optimizers: the derivation covers one
    twice: bool = False  # the fresh optimizer steps resident parameters: call again
    measured: int | None = None  # the second call's peak
    second_call_failed: str | None = None  # why the second call gave no figure
    watching: bool = False  # the first step ended: in-place writes are noted
    kept_bytes: int = 0  # bytes the first step left alive for the next (derived)
    open_gradients: int = 0  # kept gradients with no accumulation event (counted to the step)
    _keys: array[int] = field(default_factory=lambda: array("q"))
    _deltas: array[int] = field(default_factory=lambda: array("q"))
    _accumulated: list[tuple[int, int]] = field(default_factory=list)  # (event index, key)
    _recording: bool = True
    _step_end: int | None = None  # events before the first step ended
    _state: set[int] = field(default_factory=set)
    _gradients: set[int] = field(default_factory=set)  # the stepped parameters' .grad keys
    _written: set[int] = field(default_factory=set)  # storages written after the step
    _after: int = 0  # highest live bytes after the step ended
    _seen: set[int] = field(default_factory=set)
    _serials: dict[int, int] = field(default_factory=dict)  # live storage id -> serial
    _writes: dict[Any, tuple[int, ...]] = field(default_factory=dict)
    _cache: int | None = None

    # ------------------------------------------------------------------ run events
    def began(self, optimizer: torch.optim.Optimizer, current: int, peak: int) -> None:
        """An optimizer step starts (outermost): note a fresh optimizer's first step."""
        if id(optimizer) in self._seen or not self._recording:
            return
        self._seen.add(id(optimizer))
        if any(optimizer.state.values()):
            self.resident_state = True
            return
        if self._step_end is not None or self.twice:
            self.extra_fresh_steps += 1
            return
        resident = self.resident_keys or ()
        params = [p for group in optimizer.param_groups for p in group["params"]]
        self.twice = any(storage_key(p) in resident for p in params)

    def moved(self, key: int, delta: int, current: int, *, freed: bool = False) -> None:
        """``current`` changed by ``delta`` through storage ``key`` (``freed``: it is gone).

        The timeline keys each storage by a serial of its own: an ``id`` is reused by a
        later storage once the first is freed."""
        if not self._recording:
            return
        serial = self._serials.get(key)
        if serial is None:
            serial = self._serials[key] = len(self._keys)
        if freed:
            del self._serials[key]
        if self._step_end is None:
            self._keys.append(serial)
            self._deltas.append(delta)
        elif current > self._after:
            self._after = current

    def _live(self, key: int | None) -> int | None:
        return None if key is None else self._serials.get(key)

    def accumulated(self, key: int) -> None:
        """A gradient (storage ``key``) was accumulated into its parameter just now."""
        if self._recording and self._step_end is None:
            serial = self._serials.get(key)
            if serial is not None:
                self._accumulated.append((len(self._keys), serial))

    def wrote(self, func: Any, args: Any) -> None:
        """An operator ran after the first step: note the storages it wrote in place."""
        positions = self._writes.get(func)
        if positions is None:
            positions = self._writes[func] = _written_arguments(func)
        for i in positions:
            if i < len(args):
                items = args[i] if isinstance(args[i], (list, tuple)) else (args[i],)
                for item in items:
                    serial = self._live(storage_key(item))
                    if serial is not None:
                        self._written.add(serial)

    def ended(self, optimizer: torch.optim.Optimizer, current: int) -> None:
        """The first step of the fresh optimizer ended: its state and gradients are known."""
        if self._step_end is not None or not self._recording or id(optimizer) not in self._seen:
            return
        if self.resident_state:
            return
        self._step_end = len(self._keys)
        self.watching = True
        self._state = {
            key
            for entries in optimizer.state.values()
            for tensor in entries.values()
            if (key := self._live(storage_key(tensor))) is not None
        }
        self._gradients = {
            key
            for group in optimizer.param_groups
            for p in group["params"]
            if (key := self._live(storage_key(getattr(p, "grad", None)))) is not None
        }
        self._after = current

    def stop_recording(self) -> None:
        """The second call starts: nothing more belongs to the first step's timeline."""
        self._recording = self.watching = False

    # ------------------------------------------------------------------ results
    def peak(self) -> int | None:
        """The steady-state peak: the second call's, else derived; None without a fresh
        first step."""
        if self.measured is not None:
            return self.measured
        if self._step_end is None:
            return None
        if self._cache is None:
            self._cache = self._derive()
        return self._cache

    def _derive(self) -> int:
        end = self._step_end
        assert end is not None
        keys, deltas = self._keys[:end], self._deltas[:end]
        made = set(keys)
        kept = self._state | (self._written & made)
        size: dict[int, int] = {}
        for key, delta in zip(keys, deltas, strict=True):
            if key in kept:
                size[key] = size.get(key, 0) + delta
        self.kept_bytes = running = top = sum(size.values())
        gradients = kept & self._gradients
        marks = iter(self._accumulated)
        mark = next(marks, None)
        transient: dict[int, int] = {}
        for index, (key, delta) in enumerate(zip(keys, deltas, strict=True)):
            while mark is not None and mark[0] <= index:
                running -= transient.pop(mark[1], 0)
                mark = next(marks, None)
            if key not in kept:
                running += delta
            elif key in gradients and delta > 0 and key not in transient:
                transient[key] = delta  # the incoming gradient, until it is accumulated
                running += delta
            top = max(top, running)
        self.open_gradients = len(transient)
        return max(top, self._after)

    def describe(self) -> dict[str, Any]:
        """The parts, for a diagnostic."""
        return {"kept": self.kept_bytes, "after": self._after, "measured": self.measured}


def second_call(tracker: Any, call: Callable[[list[Any]], Any]) -> None:
    """Call the step again on the same fakes (``call(found)`` appends a stop's diagnostic to
    ``found``); its peak, from what is live when it starts, is the measured steady state. The
    first call's figures are put back: they stay the report's ``peak``."""
    steady: SteadyState = tracker.steady
    first = tracker.restart_peak()
    counts = (tracker.operators_seen, dict(tracker.untracked), dict(tracker.divergent))
    steady.stop_recording()
    found: list[Any] = []
    try:
        call(found)
    except Exception as error:  # the user's step failed on its second call: say so, go on
        steady.second_call_failed = f"{type(error).__name__}: {error}"[:300]
    finally:
        second = tracker.peak
        tracker.put_back(first)
        unseen = set(tracker.untracked) | set(tracker.divergent)
        # the report's diagnostics describe the first call; what only the second met
        # makes its figure a lower bound
        tracker.operators_seen, tracker.untracked, tracker.divergent = counts
    if steady.second_call_failed is None and found:
        steady.second_call_failed = found[0].message[:300]
    new = sorted(unseen - set(counts[1]) - set(counts[2]))
    if steady.second_call_failed is None and new:
        steady.second_call_failed = f"operators it could not count exactly: {', '.join(new)}"
    if steady.second_call_failed is None:
        steady.measured = second
