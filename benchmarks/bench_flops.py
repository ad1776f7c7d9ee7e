"""Overhead of measure_flops against torch's FlopCounterMode, and against the dispatch floor.

Run: ``python benchmarks/bench_flops.py [--repeats N]``. For each workload it times, side by
side and interleaved in one process, (a) the bare workload, (b) the workload inside
``FlopCounterMode(display=False)``, (c) ``measure_flops(workload)``. It prints medians and the
ratio of overheads ``(c - a) / (b - a)``; the project's target is <= 1.2. Numbers depend on
the machine and load; record them with the hardware in docs/operator-flops.md.

``--floors [--budget S | --quick] [--doc docs/benchmarks.md]`` checks the overhead bars instead
(``flops_floor.py``): measure_flops against the plain forward and the empty dispatch mode on
the ResNet-50-shaped CNN, the Transformer and the 5,000-block model, S seconds of rounds per
model (default 12; ``--quick``: 2). ``--profile MODEL`` prints where
measure_flops spends its time on one of them (cProfile).
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn as nn
from torch.utils.flop_counter import FlopCounterMode

from torchscan_stages.analysis.operators import measure_flops


def _nograd(model: nn.Module, *inputs: torch.Tensor) -> Callable[[], Any]:
    def workload() -> Any:
        with torch.no_grad():
            return model(*inputs)

    return workload


def _train_step(model: nn.Module, batch: torch.Tensor) -> Callable[[], Any]:
    optimizer = torch.optim.Adam(model.parameters())

    def workload() -> Any:
        optimizer.zero_grad()
        model(batch).pow(2).mean().backward()
        optimizer.step()

    return workload


def workloads() -> dict[str, Callable[[], Any]]:
    torch.manual_seed(0)
    mlp = nn.Sequential(
        *[layer for _ in range(8) for layer in (nn.Linear(64, 64), nn.GELU())]
    ).eval()
    cnn = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        nn.Conv2d(16, 16, 3, padding=1, groups=16),
        nn.Conv2d(16, 32, 1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(32, 10),
    ).eval()
    encoder = nn.TransformerEncoder(
        nn.TransformerEncoderLayer(64, 4, 128, batch_first=True), 2, enable_nested_tensor=False
    )
    encoder_eval = nn.TransformerEncoder(
        nn.TransformerEncoderLayer(64, 4, 128, batch_first=True), 2, enable_nested_tensor=False
    ).eval()
    tokens = torch.randn(4, 16, 64)
    cnn_train = copy.deepcopy(cnn).train()  # the same architecture and weights, training
    return {
        "mlp_forward": _nograd(mlp, torch.randn(16, 64)),
        "cnn_forward": _nograd(cnn, torch.randn(2, 3, 32, 32)),
        "cnn_train_step": _train_step(cnn_train, torch.randn(2, 3, 32, 32)),
        "encoder_forward": _nograd(encoder_eval, tokens),
        "encoder_train_step": _train_step(encoder, tokens),
    }


def _time(fn: Callable[[], Any]) -> tuple[float, float]:
    """(wall seconds, process CPU seconds): CPU time resists other processes' load."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def bench(
    workload: Callable[[], Any], repeats: int, inner: int, min_sample_s: float = 0.02
) -> dict[str, dict[str, float]]:
    """Median seconds per call of each runner, by clock; ``inner`` calls per sample at least."""

    def bare() -> None:
        for _ in range(inner):
            workload()

    def with_torch() -> None:
        for _ in range(inner):
            with FlopCounterMode(display=False):
                workload()

    def with_ours() -> None:
        for _ in range(inner):
            measure_flops(workload)

    runners = {"bare": bare, "flop_counter_mode": with_torch, "measure_flops": with_ours}
    for runner in runners.values():  # warm-up (also builds per-op caches once)
        runner()
    # calibrate: every sample of the bare workload lasts >= min_sample_s, so short workloads
    # are not dominated by timer resolution and scheduler noise
    one_call = max(_time(workload)[1], 1e-6)
    inner = max(inner, int(min_sample_s / one_call))
    samples: dict[str, dict[str, list[float]]] = {
        clock: {name: [] for name in runners} for clock in ("wall", "cpu")
    }
    for _ in range(repeats):  # interleaved to resist drift
        for name, runner in runners.items():
            wall, cpu = _time(runner)
            samples["wall"][name].append(wall / inner)
            samples["cpu"][name].append(cpu / inner)
    return {
        clock: {name: statistics.median(values) for name, values in per_runner.items()}
        for clock, per_runner in samples.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--inner", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="0 keeps torch's default")
    parser.add_argument("--only", nargs="*", default=None, help="workload names to run")
    parser.add_argument("--floors", action="store_true", help="against the dispatch floor")
    parser.add_argument("--doc", type=Path, default=None, help="with --floors: write section")
    parser.add_argument("--profile", default=None, help="cProfile measure_flops on a model")
    parser.add_argument(
        "--budget", type=float, default=12.0, help="with --floors: seconds of rounds per model"
    )
    parser.add_argument(
        "--quick", action="store_true", help="with --floors: 2 s per model (a smoke run)"
    )
    options = parser.parse_args()
    if options.threads:
        torch.set_num_threads(options.threads)
    if options.floors or options.profile:
        from flops_floor import floors_main  # benchmarks/flops_floor.py

        budget = 2.0 if options.quick else options.budget
        command = "python benchmarks/bench_flops.py " + " ".join(sys.argv[1:])
        floors_main(options.repeats, options.doc, options.profile, budget_s=budget, command=command)
        return
    print(
        f"torch {torch.__version__}, threads {torch.get_num_threads()}, "
        f"repeats {options.repeats}; ratio = (ours - bare) / (FCM - bare), target <= 1.2"
    )
    print(
        f"{'workload':20s} {'clock':5s} {'bare ms':>9s} {'FCM ms':>9s} {'ours ms':>9s} "
        f"{'ratio':>7s}"
    )
    for name, workload in workloads().items():
        if options.only and name not in options.only:
            continue
        timings = bench(workload, options.repeats, options.inner)
        for clock, t in timings.items():
            torch_overhead = t["flop_counter_mode"] - t["bare"]
            our_overhead = t["measure_flops"] - t["bare"]
            ratio = our_overhead / torch_overhead if torch_overhead > 0 else float("nan")
            print(
                f"{name:20s} {clock:5s} {t['bare'] * 1e3:9.3f} "
                f"{t['flop_counter_mode'] * 1e3:9.3f} {t['measure_flops'] * 1e3:9.3f} "
                f"{ratio:7.2f}"
            )


if __name__ == "__main__":
    main()
