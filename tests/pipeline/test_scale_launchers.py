"""One 2 x 2 grid (precision x threads) through every launcher gives the same reports.

The Ray launcher runs against a local Ray cluster this test starts on 127.0.0.1 (small:
2 CPUs, 100 MB object store) and stops in teardown. The grid runs the crawl stage: model
cost only, no timing, so parallel launchers are allowed to fan it out on 2 cores.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
GRID = ["precision=fp32,bf16", "threads=1,2"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _stop_group(pgid: int) -> None:
    """End the Ray processes this test started (their own process group), and only those."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + 20  # a bound on shutdown, not a timing claim
    while _group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


@pytest.fixture(scope="module")
def ray_address() -> Iterator[str]:
    pytest.importorskip("ray", reason="the [scale] extra (hydra-ray-launcher, ray) is needed")
    port = _free_port()
    temp = tempfile.mkdtemp(prefix="tsray", dir="/tmp")  # short: Ray's socket paths
    ray = Path(sys.executable).with_name("ray")
    start = subprocess.Popen(
        [
            str(ray), "start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}",
            "--num-cpus=2", "--num-gpus=0", "--object-store-memory=100000000",
            "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={temp}",
        ],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        output = start.communicate(timeout=120)[0]
        assert start.returncode == 0, output[-3000:]
        yield f"127.0.0.1:{port}"
    finally:
        if start.poll() is None:
            start.kill()
        _stop_group(start.pid)  # the head's daemons stay in the group `ray start` made
        shutil.rmtree(temp, ignore_errors=True)


def _sweep(tmp_path: Path, name: str, launcher: list[str]) -> dict[str, Any]:
    sweep_dir = tmp_path / name
    env = {k: v for k, v in os.environ.items() if not k.startswith("DVC_")}
    result = subprocess.run(
        [
            sys.executable, "-m", "torchscan_stages.stages.crawl", "-m", *launcher, *GRID,
            f"hydra.sweep.dir={sweep_dir}",
        ],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=400, check=False,
    )  # fmt: skip
    assert result.returncode == 0, (name, result.stdout[-1500:], result.stderr[-3000:])
    summary: dict[str, Any] = json.loads((sweep_dir / "sweep_summary.json").read_text())
    return summary


def _reports(summary: dict[str, Any]) -> set[tuple[Any, ...]]:
    """What the grid measured, per job: its axes and every totals figure with its status."""
    found = set()
    for job in summary["jobs"]:
        assert job["status"] == "completed", job
        metrics = tuple(sorted((k, m["status"], m["value"]) for k, m in job["metrics"].items()))
        found.add((tuple(sorted(job["axes"].items())), metrics))
    return found


def test_a_2x2_grid_gives_the_same_reports_through_every_launcher(
    tmp_path: Path, ray_address: str
) -> None:
    launchers = {
        "basic": [],
        "joblib": ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"],
        "submitit_local": ["hydra/launcher=submitit_local"],
        "ray": ["hydra/launcher=ray_cluster", f"hydra.launcher.ray.init.address={ray_address}"],
    }
    results = {name: _reports(_sweep(tmp_path, name, args)) for name, args in launchers.items()}
    basic = results["basic"]
    assert len(basic) == 4  # 2 precisions x 2 thread counts, one report each
    axes = sorted(dict(a)["precision"] + "/" + dict(a)["threads"] for a, _ in basic)
    assert axes == ["bf16/1", "bf16/2", "fp32/1", "fp32/2"]
    for name, found in results.items():
        assert found == basic, name  # same jobs, same figures, same statuses
