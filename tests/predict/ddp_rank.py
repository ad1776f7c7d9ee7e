"""One rank of a real DDP step on the gloo backend (CPU), for test_ddp_gloo.py.

Usage: ``python ddp_rank.py RANK WORLD PORT OUT.json [buffers]``. Joins a real process group on
127.0.0.1:PORT, runs the same ``ddp_step`` the prediction runs, with
``DistributedDataParallel`` as its ``wrap``, under ``measure_peak_memory``, and writes this
rank's measured ``cpu_tracked_tensors`` peak.
"""

from __future__ import annotations

import datetime
import json
import sys

import torch.distributed as dist
from ddp_models import ddp_step
from torch.nn.parallel import DistributedDataParallel

from torchscan_stages.measure.memory import measure_peak_memory


def main(rank: int, world: int, port: int, out: str, buffers: bool) -> None:
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=120),
    )
    try:
        step = ddp_step(batch=2, tokens=64, buffers=buffers)
        report = measure_peak_memory(lambda: step(DistributedDataParallel), device="cpu")
        [cpu] = [r for r in report.memory.results if r.scope == "cpu_tracked_tensors"]
        with open(out, "w", encoding="utf-8") as handle:
            json.dump({"rank": rank, "status": cpu.status, "peak": cpu.known_value}, handle)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main(
        int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], "buffers" in sys.argv[5:]
    )
