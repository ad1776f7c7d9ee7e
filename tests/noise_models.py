"""Generated host noise for the comparison's statistics (no real clock): drift, bursts and
a period close to one round, applied to injected interleaved rounds."""

from __future__ import annotations

import math
import random
from collections.abc import Callable

from torchscan_stages.compare.interleave import InterleavedRun

Host = Callable[[int, random.Random], tuple[float, float]]
"""(slot index, generator) -> (slowdown factor, added preemption seconds)."""


def drift(slots: int) -> Host:
    """The host slows down steadily from 1x to 3x over the run, +-1% jitter."""
    return lambda t, rng: (1.0 + 2.0 * t / slots + rng.uniform(-0.01, 0.01), 0.0)


def bursts(hit: float = 0.3, delay_s: float = 3e-3) -> Host:
    """Calm and bursty phases (a sticky two-state chain); in a burst every block is 1.5-4x
    slower and loses ``delay_s`` to a preemption with probability ``hit``."""
    state = {"burst": False}

    def host(t: int, rng: random.Random) -> tuple[float, float]:
        if rng.random() < 0.05:
            state["burst"] = not state["burst"]
        if not state["burst"]:
            return 1.0 + rng.uniform(-0.01, 0.01), 0.0
        return rng.uniform(1.5, 4.0), delay_s if rng.random() < hit else 0.0

    return host


def periodic(period: float = 3.0) -> Host:
    """A load that comes and goes every ``period`` blocks (about one round)."""
    return lambda t, rng: (1.0 + 0.5 * math.sin(2 * math.pi * t / period), 0.0)


def quiet() -> Host:
    return lambda t, rng: (1.0 + rng.uniform(-0.01, 0.01), 0.0)


def simulate(
    truth: float, host: Host, *, rounds: int = 200, seed: int = 0, probed: bool = True
) -> InterleavedRun:
    """Rounds of (baseline 1 ms, candidate ``truth`` ms, control 1 ms) blocks in a random
    order per round; each block's wall time is cost x factor + preemption, its CPU time the
    cost x factor (a preemption is waiting), with one involuntary switch when preempted."""
    rng = random.Random(seed)
    run = InterleavedRun([], [], 1, 1, 0, 0, 0.0)
    sides = {
        "base": (1e-3, run.baseline_blocks, run.baseline_trace),
        "cand": (truth * 1e-3, run.candidate_blocks, run.candidate_trace),
        "ctrl": (1e-3, run.control_blocks, run.control_trace),
    }
    slot = 0
    for _ in range(rounds):
        for name in rng.sample(list(sides), 3):
            cost, blocks, trace = sides[name]
            factor, delay = host(slot, rng)
            slot += 1
            blocks.append(cost * factor + delay)
            if probed:
                trace.add((0.0, 0), (cost * factor, 1 if delay else 0), cost * factor + delay)
    return run


def fixed_alternation(
    truth: float, host: Host, *, rounds: int = 200, seed: int = 0
) -> tuple[list[float], list[float]]:
    """The same host under the old AB, BA, AB ... order (no control): baseline, candidate."""
    rng = random.Random(seed)
    base: list[float] = []
    cand: list[float] = []
    slot = 0
    for index in range(rounds):
        order = ("base", "cand") if index % 2 == 0 else ("cand", "base")
        for name in order:
            factor, delay = host(slot, rng)
            slot += 1
            (base if name == "base" else cand).append(
                (truth if name == "cand" else 1.0) * 1e-3 * factor + delay
            )
    return base, cand


def starved(calls: int, delay_s: float = 30e-3) -> Host:
    """The first ``calls`` calls each wait ``delay_s`` for a CPU (a host saturated by other
    processes), then the host is quiet (+-1% jitter)."""
    return lambda t, rng: (1.0 + rng.uniform(-0.01, 0.01), delay_s if t < calls else 0.0)


class SimulatedHost:
    """A simulated clock, per-block probe and workloads sharing one noisy host, for the
    whole adaptive loop of compare_benchmarks: each call advances the clock by its cost
    times the host's factor plus any wait; the probe's CPU time counts the cost times the
    factor only (a wait is not CPU) and one involuntary switch per wait."""

    def __init__(self, host: Host, seed: int = 0) -> None:
        self.host = host
        self.rng = random.Random(seed)
        self.now = 0.0
        self.cpu = 0.0
        self.switches = 0
        self.calls = 0

    def __call__(self) -> float:
        return self.now

    def probe(self) -> tuple[float, int]:
        return self.cpu, self.switches

    def workload(self, cost_s: float) -> Callable[[], object]:
        def call() -> object:
            factor, wait = self.host(self.calls, self.rng)
            self.calls += 1
            self.now += cost_s * factor + wait
            self.cpu += cost_s * factor
            self.switches += 1 if wait else 0
            return 1

        return call


def preempted(share: float, slice_s: float = 4e-3) -> Host:
    """Busy processes on every core: each block loses the CPU for 0.5-1.5 time slices of
    ``slice_s`` with probability ``share`` (an involuntary switch), +-5% CPU jitter."""

    def host(t: int, rng: random.Random) -> tuple[float, float]:
        delay = slice_s * rng.uniform(0.5, 1.5) if rng.random() < share else 0.0
        return 1.0 + rng.uniform(-0.05, 0.05), delay

    return host
