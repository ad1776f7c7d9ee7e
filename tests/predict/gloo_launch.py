"""Real worlds of processes on the gloo backend (CPU, 127.0.0.1), for the slow gloo tests.

One module for both sides of a launch, so the arguments one side writes are the ones the
other reads:

- the test's side, ``launch_world(script, world, out)``: a free port on 127.0.0.1, the
  script started in a session of its own, one deadline, and the whole session killed when a
  rank fails or the deadline passes; then each rank's JSON record;
- the script's side, ``fork_world(argv, run_rank)``: the script imports torch and the cases
  once, then forks one process per rank (torch imported once, not once per rank: about 7
  CPU-s each here), each joins the real process group and runs ``run_rank``; a rank that
  fails takes its siblings down, so none waits out a collective;
- ``measure_cases(cases)``: each case's measured ``cpu_tracked_tensors`` peak, or the error it
  raised, so one broken case fails only the tests that read it.

Several cases run in the same rank processes: a launch (interpreter, torch import, process
group) costs far more than one small case.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
LOG_TAIL = 3000  # characters of a failed world's output quoted in the failure


RunRank = Callable[[int, int, Path], None]  # (rank, world, this rank's record path)


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


def _running_in_group(group: int) -> list[int]:
    """Processes of process group ``group`` not yet dead (zombies excluded), from /proc."""
    running = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()
        except OSError:  # it exited while we looked
            continue
        if int(fields[2]) == group and fields[0] != "Z":  # (state, ppid, pgrp, ...)
            running.append(int(entry.name))
    return running


def _kill_session(process: subprocess.Popen[str]) -> None:
    """SIGKILL the script and every rank it forked (they share its session), and wait
    until none of them runs: a SIGKILL is delivered, not carried out, by ``killpg``."""
    with suppress(ProcessLookupError):  # the script and its ranks have all exited
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    deadline = time.monotonic() + 30
    while Path("/proc").is_dir() and _running_in_group(process.pid):
        if time.monotonic() > deadline:
            raise WorldFailed(f"ranks {_running_in_group(process.pid)} survived SIGKILL")
        time.sleep(0.05)


def launch_world(
    script: Path,
    world: int,
    out: Path,
    *,
    args: list[str] | None = None,
    timeout: float = 420.0,
) -> list[dict[str, Any]]:
    """Run ``script WORLD PORT OUT [ARGS]`` (it forks the ranks); return the ranks' records.

    Raises ``WorldFailed`` with the script's output when it exits non-zero, when a rank
    writes no record, and when the world is still running after ``timeout`` seconds; no
    rank outlives this call either way.
    """
    command = [sys.executable, str(script), str(world), str(free_port()), str(out), *(args or [])]
    process = subprocess.Popen(
        command,
        env=_rank_environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # one process group: the ranks are killed with the script
    )
    try:
        log = process.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired as expired:
        _kill_session(process)
        tail = (process.communicate()[0] or "")[-LOG_TAIL:]
        raise WorldFailed(
            f"{script.name} world {world}: still running after {timeout} s:\n{tail}"
        ) from expired
    finally:
        _kill_session(process)
    if process.returncode != 0:
        raise WorldFailed(
            f"{script.name} world {world} exited {process.returncode}:\n{log[-LOG_TAIL:]}"
        )
    records = []
    for rank in range(world):
        path = out / f"rank{rank}.json"
        if not path.exists():
            raise WorldFailed(f"{script.name} world {world}: rank {rank} wrote no {path.name}")
        records.append(json.loads(path.read_text(encoding="utf-8")))
    return records


def case_peaks(records: list[dict[str, Any]], case: str) -> list[int]:
    """Each rank's measured peak of ``case``; fails with the rank's traceback if it raised."""
    peaks = []
    for rank, record in enumerate(records):
        assert case in record["cases"], f"case {case} was not run: its module's GLOO_FAMILY?"
        result = record["cases"][case]
        assert "error" not in result, f"rank {rank}, case {case}:\n{result['error']}"
        assert result["status"] == "complete", (rank, case, result)
        peaks.append(int(result["peak"]))
    return peaks


# -- a rank's side -------------------------------------------------------------------------


@contextmanager
def joined_world(rank: int, world: int, port: int) -> Iterator[None]:
    """Join the gloo group on 127.0.0.1:``port`` as ``rank`` of ``world``; destroy it on
    the way out, also on an error."""
    import datetime

    import torch.distributed as dist

    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=120),
    )
    try:
        yield
    finally:
        dist.destroy_process_group()


def _rank_child(rank: int, world: int, port: int, out: Path, run_rank: RunRank) -> None:
    """The forked rank: join, run, leave; never returns (``os._exit``: no parent cleanup)."""
    code = 1
    try:
        with joined_world(rank, world, port):
            run_rank(rank, world, out / f"rank{rank}.json")
        code = 0
    except BaseException:  # printed for the launcher's failure message, then exit 1
        print(f"rank {rank} of {world} failed:\n{traceback.format_exc()}", flush=True)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def fork_world(argv: list[str], run_rank: RunRank) -> int:
    """The script's main: fork one rank per ``range(WORLD)`` from ``argv`` (WORLD PORT OUT),
    wait for all; the first to fail has its siblings killed. Returns the exit status."""
    world, port, out = int(argv[1]), int(argv[2]), Path(argv[3])
    # fork copies only the calling thread: a second thread's held locks would never be freed
    assert threading.active_count() == 1, "fork_world: fork the ranks before any thread starts"
    ranks: dict[int, int] = {}
    for rank in range(world):
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _rank_child(rank, world, port, out, run_rank)
        ranks[pid] = rank
    status = 0
    while ranks:
        pid, wait_status = os.wait()
        rank = ranks.pop(pid)
        code = os.waitstatus_to_exitcode(wait_status)
        if code != 0 and status == 0:
            print(f"rank {rank} of {world} exited {code}; killing the others", flush=True)
            status = 1
            for other in ranks:
                os.kill(other, signal.SIGKILL)
    return status


def measure_cases(
    cases: dict[str, Callable[[], None]], twice: frozenset[str] = frozenset()
) -> dict[str, dict[str, Any]]:
    """Each case's ``cpu_tracked_tensors`` peak under ``measure_peak_memory``, in order.

    A case named in ``twice`` is measured twice on every rank (so the collectives stay
    paired) and records the lower peak: now and then gloo makes a collective's flat copy on
    the calling thread where the tracker sees it (seen: +55,296 B on one FSDP2 rank of
    1,235,080), scratch of the backend, not a tensor of the step's.
    A case that raises is recorded with its traceback and the next one still runs (all ranks
    run the same cases in the same order, so their collectives stay paired)."""
    from torchscan_stages.measure.memory import measure_peak_memory

    results: dict[str, dict[str, Any]] = {}
    for name, case in cases.items():
        try:
            reports = [measure_peak_memory(case, device="cpu") for _ in range(1 + (name in twice))]
        except Exception:  # reported to the test that reads this case
            results[name] = {"error": traceback.format_exc()}
            continue
        found = []
        for report in reports:
            assert report.memory is not None, f"case {name}: no memory section"
            [cpu] = [r for r in report.memory.results if r.scope == "cpu_tracked_tensors"]
            found.append(cpu)
        low = min(found, key=lambda cpu: cpu.known_value or 0)
        results[name] = {"status": low.status, "peak": low.known_value}
        results[name]["peaks"] = [cpu.known_value for cpu in found]
    return results


def write_record(out: Path, rank: int, cases: dict[str, dict[str, Any]]) -> None:
    """This rank's record, written whole (a rename) so a killed rank leaves none."""
    partial = out.with_suffix(".part")
    partial.write_text(json.dumps({"rank": rank, "cases": cases}), encoding="utf-8")
    partial.replace(out)
