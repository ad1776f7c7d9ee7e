"""crawl_module overhead vs a plain no_grad forward (1 thread), and per-layer cost scaling.

Targets (issue #2): full <= 1.3x and structure <= 1.15x a plain forward on a ResNet-50-shaped
CNN and a 4-layer Transformer encoder; per-layer cost flat from 100 to 5000 layers.
Prints ratios; it is a benchmark script, not a timed test. ``--quick`` uses fewer repeats.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
from models import resnet50_shaped, transformer_encoder  # benchmarks/models.py: one model set
from torch import nn

from torchscan_stages.analysis.crawl import crawl_module


def deep_mlp(n: int) -> nn.Module:
    return nn.Sequential(*[nn.Linear(16, 16) for _ in range(n)])


def best_of(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def overhead(name: str, model: nn.Module, x: torch.Tensor, repeats: int) -> None:
    model.eval()

    def plain() -> None:
        with torch.no_grad():
            model(x)

    base = best_of(plain, repeats)
    full = best_of(lambda: crawl_module(model, args=(x,)), repeats)
    struct = best_of(lambda: crawl_module(model, args=(x,), mode="structure"), repeats)
    print(
        f"{name:<22} plain {base * 1e3:8.2f} ms  full {full / base:5.2f}x (target 1.30)  "
        f"structure {struct / base:5.2f}x (target 1.15)"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    options = parser.parse_args()
    repeats = 3 if options.quick else 7
    torch.set_num_threads(1)
    overhead("resnet50-shaped 224", resnet50_shaped(), torch.randn(1, 3, 224, 224), repeats)
    overhead("transformer 4x256 L128", transformer_encoder(), torch.randn(1, 128, 256), repeats)
    x = torch.randn(1, 16)
    for n in (100, 1000, 5000):
        model = deep_mlp(n)

        def run_full(m: nn.Module = model) -> object:
            return crawl_module(m, args=(x,))

        def run_structure(m: nn.Module = model) -> object:
            return crawl_module(m, args=(x,), mode="structure")

        full = best_of(run_full, max(1, repeats // 2))
        struct = best_of(run_structure, max(1, repeats // 2))
        print(
            f"{n:>5} layers: full {full / n * 1e6:7.1f} us/layer  "
            f"structure {struct / n * 1e6:7.1f} us/layer"
        )


if __name__ == "__main__":
    main()
