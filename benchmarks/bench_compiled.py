"""A compiled model before and after the analysis, side by side. A benchmark, not a test.

Run: ``python benchmarks/bench_compiled.py``. Compiles a small MLP with the default inductor
backend, times its warmed calls (median and IQR of per-block means, blocks interleaved:
before, after), runs ``measure_flops``, ``crawl_module`` and ``measure_workload(latency=False)``
on it, times it again, and prints both with Dynamo's frame counters. Before this session's
change the second timing was the eager model's (pytorch/pytorch#140909's defect); now the
two agree within the printed noise. Record the host load beside any figure you keep.
"""

from __future__ import annotations

import os
import statistics
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch._dynamo.utils import counters

from torchscan_stages import crawl_module, measure_flops, measure_workload

BLOCKS, CALLS = 15, 200


def _blocks(call: Callable[[], Any]) -> list[float]:
    out = []
    for _ in range(BLOCKS):
        start = time.perf_counter()
        for _ in range(CALLS):
            call()
        out.append((time.perf_counter() - start) / CALLS)
    return out


def _describe(samples: list[float]) -> str:
    q1, median, q3 = statistics.quantiles(samples, n=4)
    return f"median {median * 1e6:8.1f} us  IQR {(q3 - q1) * 1e6:6.1f} us"


def main() -> None:
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 512), nn.GELU(), nn.Linear(512, 256)).eval()
    compiled = torch.compile(model)
    x = torch.randn(32, 256)

    def call() -> Any:
        with torch.no_grad():
            return compiled(x)

    def eager() -> Any:
        with torch.no_grad():
            return model(x)

    for _ in range(20):
        call()
    frames = dict(counters["frames"])
    before, eager_times = _blocks(call), _blocks(eager)
    measure_flops(call)
    crawl_module(compiled, (256,))
    measure_workload(call, latency=False, progress=False)
    after = _blocks(call)
    print(f"host load (1, 5, 15 min): {os.getloadavg()}")
    print(f"compiled before analysis: {_describe(before)}")
    print(f"compiled after analysis:  {_describe(after)}")
    print(f"eager, for reference:     {_describe(eager_times)}")
    print(f"Dynamo frames before {frames}, after {dict(counters['frames'])}")


if __name__ == "__main__":
    main()
