"""Every real gloo case (FSDP2, DDP, tensor parallel) at one world size, for the gloo tests.

Usage: ``python gloo_rank.py WORLD PORT OUT_DIR FAMILY[,FAMILY...]`` (as
``gloo_launch.launch_world`` starts it; families: fsdp, ddp, tp). Imports torch and
everything the cases use once, then forks one process per rank; each joins a real process
group on 127.0.0.1:PORT, runs each case of the families in ``gloo_cases`` once under
``measure_peak_memory``, in the same order on every rank, and writes OUT_DIR/rankR.json with
each case's measured ``cpu_tracked_tensors`` peak: one launch serves all the cases.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path

# imported before the fork, so no rank imports them again: fully_shard and DTensor's
# parallel styles pull in most of torch.distributed, and their first call torch._dynamo
import torch._dynamo
import torch.distributed.fsdp
import torch.distributed.tensor.parallel  # noqa: F401
from gloo_cases import DDP_CASES, FSDP_CASES, TP_CASES, ddp_case, fsdp_case, tp_case
from gloo_launch import fork_world, measure_cases, write_record
from torch.distributed.device_mesh import init_device_mesh
from torch.nn.parallel import DistributedDataParallel

import torchscan_stages.measure.memory  # noqa: F401  (measure_cases imports it lazily)


def run_rank(families: set[str], rank: int, world: int, out: Path) -> None:
    """This rank's cases of ``families``, measured in order, written to ``out``."""
    mesh = init_device_mesh("cpu", (world,))
    cases: dict[str, Callable[[], None]] = {}
    for name in FSDP_CASES if "fsdp" in families else ():
        cases[name] = partial(fsdp_case(name), mesh)
    for name in DDP_CASES if "ddp" in families else ():
        cases[name] = partial(ddp_case(name), DistributedDataParallel)
    for name in TP_CASES if "tp" in families else ():
        cases[name] = partial(tp_case(name), mesh)
    write_record(out, rank, measure_cases(cases))


if __name__ == "__main__":
    families = set(sys.argv[4].split(","))
    assert families <= {"fsdp", "ddp", "tp"}, f"gloo_rank.py: unknown families {families}"
    sys.exit(fork_world(sys.argv, partial(run_rank, families)))
