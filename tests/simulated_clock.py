"""A simulated clock for timing tests (see tests/conftest.py for why)."""

from __future__ import annotations

import random
from collections.abc import Callable


class SimulatedClock:
    """A clock that only moves when a simulated workload says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def workload(
        self, cost_s: float, *, noise: float = 0.0, seed: int = 0, output: object = None
    ) -> Callable[[], object]:
        """A workload that costs ``cost_s`` per call, times a uniform factor in 1 ± noise."""
        rng = random.Random(seed)

        def call() -> object:
            self.now += cost_s * (1.0 + rng.uniform(-noise, noise))
            return cost_s if output is None else output

        return call
