"""First step and steady state of a training step, from one fake run.

A fresh optimizer creates its state (AdamW: ``exp_avg``, ``exp_avg_sq``, ``step``) inside its
first ``step()``; from the second step on that state exists through the whole forward and
backward pass. The steady-state peak is therefore derived from the first step's timeline:
while the first step of a fresh optimizer runs, every byte change is recorded with its
storage; at its end the storages now in ``optimizer.state`` are the state ``S``. With the
state present from the start, the same operators give

* before the step: the run's peak so far ``+ S``;
* during the step: the bytes live when it began ``+ S +`` the highest running sum of the
  step's other changes (its temporaries, the same in every step);
* after the step: what the first step saw (the state is already there).

An optimizer whose state exists before the run (built and stepped outside) makes the run a
steady-state step itself; its first-step peak is then not predicted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass(slots=True)
class SteadyState:
    """The byte timeline of a fresh optimizer's first step, and what it implies."""

    resident_state: bool = False  # an optimizer stepped with state from before the run
    extra_fresh_steps: int = 0  # later fresh optimizers: the derivation covers one
    derived: int | None = None  # the steady-state peak, once a first step ended
    _timeline: list[tuple[int, int]] | None = None
    _start: tuple[int, int] = (0, 0)  # (live bytes, peak so far) when the step began
    _after: int | None = None  # highest live bytes after the step ended
    _parts: tuple[int, int] = (0, 0)
    _seen: set[int] = field(default_factory=set)

    def began(self, optimizer: torch.optim.Optimizer, current: int, peak: int) -> None:
        """An optimizer step starts (outermost): record it if the optimizer is fresh."""
        if id(optimizer) in self._seen:
            return
        self._seen.add(id(optimizer))
        if any(optimizer.state.values()):
            self.resident_state = True
            return
        if self._timeline is not None or self.derived is not None:
            self.extra_fresh_steps += 1
            return
        self._timeline = []
        self._start = (current, peak)

    def moved(self, key: int, delta: int, current: int) -> None:
        """``current`` changed by ``delta`` through storage ``key``."""
        if self._timeline is not None:
            self._timeline.append((key, delta))
        elif self._after is not None and current > self._after:
            self._after = current

    def ended(self, optimizer: torch.optim.Optimizer, current: int) -> None:
        """The first step ended: split its changes into state and the rest."""
        if self._timeline is None:
            return
        state = {
            id(tensor.untyped_storage())
            for entries in optimizer.state.values()
            for tensor in entries.values()
            if isinstance(tensor, torch.Tensor)
        }
        state_bytes = running = top = 0
        for key, delta in self._timeline:
            if key in state:
                state_bytes += delta
                continue
            running += delta
            top = max(top, running)
        self._timeline = None
        live, peak = self._start
        self._parts = (peak + state_bytes, live + state_bytes + top)
        self._after = current

    def peak(self) -> int | None:
        """The derived steady-state peak, or None when no fresh first step ended."""
        if self._after is None:
            return None
        return max(*self._parts, self._after)

    def describe(self) -> dict[str, Any]:
        """The parts, for a diagnostic."""
        return {"before_step": self._parts[0], "in_step": self._parts[1], "after": self._after}
