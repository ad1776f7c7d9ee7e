"""A tensor-parallel MLP step (``parallelize_module``: column- then row-wise) and one real
rank of it on the gloo backend, for test_tp_gloo.py.

Usage: ``python tp_rank.py RANK WORLD PORT OUT.json``: joins a real process group on
127.0.0.1:PORT, runs ``tp_step`` under ``measure_peak_memory`` and writes this rank's
measured ``cpu_tracked_tensors`` peak.
"""

from __future__ import annotations

import datetime
import json
import sys
from typing import Any

import torch
from torch import nn


def tp_step(mesh: Any, batch: int = 4) -> None:
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(256, 1024, bias=False), nn.ReLU(), nn.Linear(1024, 256, bias=False)
    )
    model = parallelize_module(model, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    optimizer = torch.optim.AdamW(model.parameters(), foreach=False)
    model(torch.randn(batch, 64, 256)).pow(2).mean().backward()
    optimizer.step()
    optimizer.zero_grad()


def main(rank: int, world: int, port: int, out: str) -> None:
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    from torchscan_stages.measure.memory import measure_peak_memory

    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=120),
    )
    try:
        mesh = init_device_mesh("cpu", (world,))
        report = measure_peak_memory(lambda: tp_step(mesh), device="cpu")
        [cpu] = [r for r in report.memory.results if r.scope == "cpu_tracked_tensors"]
        with open(out, "w", encoding="utf-8") as handle:
            json.dump({"rank": rank, "status": cpu.status, "peak": cpu.known_value}, handle)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
