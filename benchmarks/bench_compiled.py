"""Compiled models before and after the analysis, side by side. A benchmark, not a test.

Run: ``python benchmarks/bench_compiled.py [--rounds N] [--markdown]``. For a tiny MLP and a
tiny CNN it compiles two copies of the same model with the default inductor backend: a
*control* that is never analysed and an *analysed* copy that ``measure_flops``,
``crawl_module`` and ``measure_workload(latency=False)`` run on. Both, and the eager model,
are timed in interleaved rounds (each round one block of each, in a seeded shuffled order)
before and after the analysis. The figure that matters is the per-round ratio analysed /
control: the host's load moves both copies alike, so the ratio after the analysis equals the
ratio before within the rounds' spread when the analysis left the compiled model as found
(pytorch/pytorch#140909's defect would put it at the eager / control ratio instead). Dynamo's
compiled-frame counter is printed before and after the analysis. Record the host load.
"""

from __future__ import annotations

import argparse
import copy
import io
import os
import random
import statistics
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch._dynamo.utils import counters

from torchscan_stages import crawl_module, measure_flops, measure_workload

BLOCK_S = 0.02  # seconds of calls per block


def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(256, 512), nn.GELU(), nn.Linear(512, 256))


def _cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(16, 16, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(16, 10),
    )


MODELS: dict[str, tuple[Callable[[], nn.Module], tuple[int, ...]]] = {
    "MLP 256-512-256, batch 32": (_mlp, (32, 256)),
    "CNN 2 conv 3x3 x16, 32x32, batch 8": (_cnn, (8, 3, 32, 32)),
}


def _caller(model: Any, x: torch.Tensor) -> Callable[[], Any]:
    def call() -> Any:
        with torch.no_grad():
            return model(x)

    return call


def _per_block(call: Callable[[], Any]) -> int:
    """Calls that fill about BLOCK_S."""
    start, calls = time.perf_counter(), 0
    while time.perf_counter() - start < BLOCK_S / 4:
        call()
        calls += 1
    return max(1, 4 * calls)


def _rounds(sides: dict[str, Callable[[], Any]], rounds: int, seed: int) -> dict[str, list[float]]:
    """Per-call seconds of each side's block, one block of each side per round."""
    calls = {name: _per_block(call) for name, call in sides.items()}
    order, rng = list(sides), random.Random(seed)
    times: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(rounds):
        rng.shuffle(order)
        for name in order:
            call, n = sides[name], calls[name]
            start = time.perf_counter()
            for _ in range(n):
                call()
            times[name].append((time.perf_counter() - start) / n)
    return times


def _spread(samples: list[float]) -> tuple[float, float, float]:
    q1, median, q3 = statistics.quantiles(samples, n=4)
    return q1, median, q3


def _frames() -> int:
    return int(counters["frames"].get("ok", 0))


def bench(
    label: str, factory: Callable[[], nn.Module], shape: tuple[int, ...], rounds: int
) -> list[str]:
    torch.manual_seed(0)
    eager = factory().eval()
    control, analysed = torch.compile(copy.deepcopy(eager)), torch.compile(copy.deepcopy(eager))
    x = torch.randn(*shape)
    sides = {
        "control": _caller(control, x),
        "analysed": _caller(analysed, x),
        "eager": _caller(eager, x),
    }
    for call in sides.values():
        for _ in range(20):  # compile, then warm
            call()
    frames_before = _frames()
    before = _rounds(sides, rounds, seed=1)
    measure_flops(sides["analysed"])
    crawl_module(analysed, shape[1:])
    measure_workload(sides["analysed"], latency=False, progress=False, file=io.StringIO())
    frames_after = _frames()
    after = _rounds(sides, rounds, seed=2)
    lines = []
    for phase, times in (("before", before), ("after", after)):
        ratio = [a / c for a, c in zip(times["analysed"], times["control"], strict=True)]
        eager_ratio = [e / c for e, c in zip(times["eager"], times["control"], strict=True)]
        q1, med, q3 = _spread(ratio)
        _, control_median, _ = _spread(times["control"])
        _, analysed_median, _ = _spread(times["analysed"])
        lines.append(
            f"| {label} | {phase} | {control_median * 1e6:.0f} | {analysed_median * 1e6:.0f} "
            f"| {med:.3f} [{q1:.3f}, {q3:.3f}] | {statistics.median(eager_ratio):.3f} "
            f"| {frames_before if phase == 'before' else frames_after} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=21)
    options = parser.parse_args()
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    print(f"host load at start (1, 5, 15 min): {os.getloadavg()}")
    print(
        "| model | timed | control us/call | analysed us/call | analysed / control per round, "
        "median [IQR] | eager / control | Dynamo frames compiled (process total) |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for label, (factory, shape) in MODELS.items():
        for line in bench(label, factory, shape, options.rounds):
            print(line, flush=True)
    print(f"host load at end (1, 5, 15 min): {os.getloadavg()}")


if __name__ == "__main__":
    main()
