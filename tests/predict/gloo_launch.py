"""Real worlds of processes on the gloo backend (CPU, 127.0.0.1), for the slow gloo tests.

One module for both sides of a launch, so the arguments one side writes are the ones the
other reads:

- the test's side, ``launch_world(script, world, out)``: a free port on 127.0.0.1, one child
  process per rank, one deadline for all of them, every rank still running killed when one
  fails or the deadline passes, then each rank's JSON record;
- a rank's side, ``joined_world(argv)`` (joins the real process group the launcher named and
  always destroys it) and ``measure_cases(cases)`` (each case's measured
  ``cpu_tracked_tensors`` peak, or the error it raised, so one broken case fails only the
  tests that read it).

Several cases run in the same rank processes: a launch (interpreter, torch import, process
group) costs far more than one small case.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
LOG_TAIL = 3000  # characters of a failed rank's output quoted in the failure


class WorldFailed(AssertionError):
    """A rank exited non-zero, wrote no record, or the world ran past its deadline."""


def free_port() -> int:
    """A port on 127.0.0.1 nothing listens on now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _rank_environment() -> dict[str, str]:
    env = dict(os.environ)
    # the rank imports this tree (not the venv's editable install) and the tests' helpers
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(HERE), env.get("PYTHONPATH", "")])
    env["OMP_NUM_THREADS"] = "1"  # N ranks share 2 cores
    return env


def _stop(ranks: list[subprocess.Popen[str]]) -> None:
    for process in ranks:
        if process.poll() is None:
            process.kill()
    for process in ranks:
        process.wait(timeout=30)


def launch_world(
    script: Path, world: int, out: Path, *, timeout: float = 420.0
) -> list[dict[str, Any]]:
    """Run ``script RANK WORLD PORT OUT.json`` once per rank and return the ranks' records.

    Raises ``WorldFailed`` with the failing rank's output when a rank exits non-zero or
    writes no record, and when the world is still running after ``timeout`` seconds; no
    rank outlives this call either way.
    """
    port = free_port()
    env = _rank_environment()
    paths = [out / f"rank{rank}.json" for rank in range(world)]
    ranks = [
        subprocess.Popen(
            [sys.executable, str(script), str(rank), str(world), str(port), str(path)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank, path in enumerate(paths)
    ]
    deadline = time.monotonic() + timeout
    logs: list[str] = []
    try:
        for rank, process in enumerate(ranks):
            try:
                logs.append(process.communicate(timeout=max(1.0, deadline - time.monotonic()))[0])
            except subprocess.TimeoutExpired as expired:
                raise WorldFailed(
                    f"{script.name} world {world}: rank {rank} still running after {timeout} s"
                ) from expired
            if process.returncode != 0:
                raise WorldFailed(
                    f"{script.name} world {world}: rank {rank} exited {process.returncode}:\n"
                    f"{logs[rank][-LOG_TAIL:]}"
                )
    finally:
        _stop(ranks)
    records = []
    for rank, path in enumerate(paths):
        if not path.exists():
            raise WorldFailed(f"{script.name} world {world}: rank {rank} wrote no {path.name}")
        records.append(json.loads(path.read_text(encoding="utf-8")))
    return records


def case_peaks(records: list[dict[str, Any]], case: str) -> list[int]:
    """Each rank's measured peak of ``case``; fails with the rank's traceback if it raised."""
    peaks = []
    for rank, record in enumerate(records):
        result = record["cases"][case]
        assert "error" not in result, f"rank {rank}, case {case}:\n{result['error']}"
        assert result["status"] == "complete", (rank, case, result)
        peaks.append(int(result["peak"]))
    return peaks


# -- a rank's side -------------------------------------------------------------------------


@contextmanager
def joined_world(argv: list[str]) -> Iterator[tuple[int, int, Path]]:
    """Join the gloo group ``launch_world`` named in ``argv`` (RANK WORLD PORT OUT.json);
    yields (rank, world, out) and destroys the group on the way out, also on an error."""
    import datetime

    import torch.distributed as dist

    rank, world, port, out = int(argv[1]), int(argv[2]), int(argv[3]), Path(argv[4])
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=120),
    )
    try:
        yield rank, world, out
    finally:
        dist.destroy_process_group()


def measure_cases(cases: dict[str, Callable[[], None]]) -> dict[str, dict[str, Any]]:
    """Each case's ``cpu_tracked_tensors`` peak under ``measure_peak_memory``, in order.

    A case that raises is recorded with its traceback and the next one still runs (all ranks
    run the same cases in the same order, so their collectives stay paired)."""
    from torchscan_stages.measure.memory import measure_peak_memory

    results: dict[str, dict[str, Any]] = {}
    for name, case in cases.items():
        try:
            report = measure_peak_memory(case, device="cpu")
        except Exception:  # reported to the test that reads this case
            results[name] = {"error": traceback.format_exc()}
            continue
        [cpu] = [r for r in report.memory.results if r.scope == "cpu_tracked_tensors"]
        results[name] = {"status": cpu.status, "peak": cpu.known_value}
    return results


def write_record(out: Path, rank: int, cases: dict[str, dict[str, Any]]) -> None:
    """This rank's record, written whole (a rename) so a killed rank leaves none."""
    partial = out.with_suffix(".part")
    partial.write_text(json.dumps({"rank": rank, "cases": cases}), encoding="utf-8")
    partial.replace(out)
