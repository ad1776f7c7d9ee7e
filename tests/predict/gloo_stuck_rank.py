"""Worlds that go wrong on purpose, for test_gloo_launch.py's teardown checks.

Usage: ``python gloo_stuck_rank.py WORLD PORT OUT_DIR MODE``; every rank writes its pid to
OUT_DIR/pidR. MODE ``fail``: ``fork_world``'s ranks join the real gloo group, then rank 1
raises while the others wait in a barrier it never reaches. MODE ``hang``: ranks forked
without torch (so the deadline can be short) sleep past any deadline.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from gloo_launch import fork_world


def _write_pid(out_dir: Path, rank: int) -> None:
    (out_dir / f"pid{rank}").write_text(str(os.getpid()), encoding="utf-8")


def run_rank(rank: int, world: int, out: Path) -> None:
    import torch.distributed as dist

    _write_pid(out.parent, rank)
    if rank == 1:
        raise RuntimeError("rank 1 broke on purpose")
    dist.barrier()  # never completes: rank 1 is gone


def hang(world: int, out_dir: Path) -> int:
    for rank in range(world):
        if os.fork() == 0:
            _write_pid(out_dir, rank)
            time.sleep(600)
            os._exit(0)
    for _ in range(world):
        os.wait()
    return 0


if __name__ == "__main__":
    if sys.argv[4] == "hang":
        sys.exit(hang(int(sys.argv[1]), Path(sys.argv[3])))
    sys.exit(fork_world(sys.argv, run_rank))
