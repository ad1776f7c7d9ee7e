"""One rank of every real gloo case (FSDP2, DDP, tensor parallel), for the gloo tests.

Usage: ``python gloo_rank.py RANK WORLD PORT OUT.json`` (as ``gloo_launch.launch_world``
starts it). Joins a real process group on 127.0.0.1:PORT and runs each case of
``gloo_cases`` once under ``measure_peak_memory``, in the same order on every rank, then
writes each case's measured ``cpu_tracked_tensors`` peak: one launch serves all the cases.
"""

from __future__ import annotations

import sys

from gloo_cases import DDP_CASES, FSDP_CASES, ddp_case, fsdp_case, tp_step
from gloo_launch import joined_world, measure_cases, write_record
from torch.distributed.device_mesh import init_device_mesh
from torch.nn.parallel import DistributedDataParallel


def main(argv: list[str]) -> None:
    with joined_world(argv) as (rank, world, out):
        mesh = init_device_mesh("cpu", (world,))
        cases = {name: (lambda n=name: fsdp_case(n)(mesh)) for name in FSDP_CASES}
        for name in DDP_CASES:
            cases[name] = lambda n=name: ddp_case(n)(DistributedDataParallel)
        cases["tp"] = lambda: tp_step(mesh)
        write_record(out, rank, measure_cases(cases))


if __name__ == "__main__":
    main(sys.argv)
