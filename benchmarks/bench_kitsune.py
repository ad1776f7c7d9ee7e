"""Max-batch search side by side: torch-kitsune 0.7.0's and ours, on the same model.

Run: ``.venv/bin/python benchmarks/bench_kitsune.py`` (needs the ``bench`` extra:
``pip install -c constraints.txt torch-kitsune==0.7.0``). The model is a stack of the test
decoder's blocks (RMSNorm, grouped-query attention, SwiGLU MLP) fed float hidden states, fp32,
AdamW, one device: kitsune models neither sharding nor token-id inputs (its estimators feed
``torch.randn``), so this is the largest common ground. The capacity is kitsune's own usable
size of its ``a100-80gb`` entry (80 GiB less its 0.5 GiB driver allowance); kitsune also adds
15 % overhead on top of its estimate, we add none (our figure is ``max_memory_allocated``).

Each search runs once in this process, timed by wall clock and CPU time. Our answer is
checked by its own two side-by-side direct predictions; kitsune's answer is checked by a
direct prediction of ours at that batch (whether it fits by our reckoning).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "predict"))
from predict_models import Block, DecoderShape

from torchscan_stages import max_batch_size, predict_peak_memory

SHAPE = DecoderShape(vocab=0, dim=2048, layers=16, heads=16, kv_heads=16, hidden=5632)
TOKENS = 2048


def stack() -> nn.Module:
    return nn.Sequential(*(Block(SHAPE) for _ in range(SHAPE.layers)))


def step_factory(batch: int):
    def step() -> None:
        model = stack()
        optimizer = torch.optim.AdamW(model.parameters())
        model(torch.randn(batch, TOKENS, SHAPE.dim)).pow(2).mean().backward()
        optimizer.step()
        optimizer.zero_grad()

    return step


def timed(call):
    wall, cpu = time.perf_counter(), time.process_time()
    out = call()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def main() -> int:
    from kitsune.predict.estimator import predict_memory
    from kitsune.predict.gpu_database import get_gpu_spec

    torch.set_num_threads(1)
    spec = get_gpu_spec("a100-80gb")
    assert spec is not None
    capacity = int(spec.usable_vram_gb * 2**30)
    print(f"host load average before: {os.getloadavg()[0]:.1f}")
    with torch.device("meta"):
        model = stack()
    kit, kit_wall, kit_cpu = timed(
        lambda: predict_memory(
            model, (TOKENS, SHAPE.dim), optimizer="adamw", gpu="a100-80gb",
            find_max_batch_size=True,
        )
    )  # fmt: skip
    print(f"kitsune: batch {kit.max_batch_size}, {kit_wall:.1f} s wall, {kit_cpu:.1f} s CPU")
    ours, our_wall, our_cpu = timed(
        lambda: max_batch_size(step_factory, capacity_bytes=capacity, device="cuda")
    )
    print(
        f"ours: batch {ours.batch}, {len(ours.probes)} probes, {our_wall:.1f} s wall, "
        f"{our_cpu:.1f} s CPU"
    )
    for probe in ours.probes:
        print(f"  probe {probe.batch}: {probe.peak.known_value:,} B fits={probe.fits}")
    if kit.max_batch_size is not None and kit.max_batch_size not in {p.batch for p in ours.probes}:
        check = predict_peak_memory(
            step_factory(kit.max_batch_size), device="cuda", capacity_bytes=capacity
        )
        print(f"  our prediction at kitsune's batch {kit.max_batch_size}: "
              f"{check.peak.known_value:,} B fits={check.fits}")  # fmt: skip
    print(f"capacity {capacity:,} B; host load average after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
