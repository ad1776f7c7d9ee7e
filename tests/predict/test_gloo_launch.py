"""The gloo launcher's teardown: a failing rank or a world past its deadline ends in a
``WorldFailed`` naming what went wrong, and no rank process outlives the launch."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from gloo_launch import HERE, WorldFailed, launch_world

pytestmark = pytest.mark.slow


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (killed, not yet reaped by init) runs nothing
    with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] != "Z"


def _pids(out: Path, world: int) -> list[int]:
    return [int((out / f"pid{rank}").read_text(encoding="utf-8")) for rank in range(world)]


def test_a_failing_rank_takes_the_world_down(tmp_path: Path) -> None:
    with pytest.raises(WorldFailed, match="exited 1") as failed:
        launch_world(HERE / "gloo_stuck_rank.py", 2, tmp_path, args=["fail"])
    assert "rank 1 of 2 failed" in str(failed.value)
    assert "rank 1 broke on purpose" in str(failed.value)  # the rank's own traceback
    assert not any(_alive(pid) for pid in _pids(tmp_path, 2))  # rank 0 was in a barrier


def test_a_world_past_its_deadline_is_killed(tmp_path: Path) -> None:
    with pytest.raises(WorldFailed, match=r"still running after 10\.0 s"):
        launch_world(HERE / "gloo_stuck_rank.py", 2, tmp_path, args=["hang"], timeout=10.0)
    assert not any(_alive(pid) for pid in _pids(tmp_path, 2))  # both were sleeping
