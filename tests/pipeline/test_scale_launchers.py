"""One 2 x 2 grid (precision x seed) through every launcher gives the same reports.

The Ray launcher runs against a local Ray cluster this test starts on 127.0.0.1 (small:
2 CPUs, 100 MB object store) and stops in teardown. The grid runs the crawl stage: model
cost only, no timing, so parallel launchers are allowed to fan it out on 2 cores.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
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
from pipeline_checks import commit_as_the_readme_says
from pipeline_children import dvc_env
from pipeline_repo import PipelineRepos

from torchscan_stages.report import load_report

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
GRID = ["precision=fp32,bf16", "seed=1,2"]  # crawl reads both (not threads: it times nothing)


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


# Ray 2.5x turns token authentication on when ~/.ray/auth_token exists (a local ray.init()
# writes one): the test cluster uses its own token, given to the head and to the sweep.
RAY_ENV = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}


def _loopback_namespace() -> str:
    """A network namespace with only ``lo`` up, made for this test and deleted after it.

    Ray 2.60 binds its dashboard agent, runtime-env agent and client server to the host's
    own interface address even with ``--node-ip-address=127.0.0.1``; inside this namespace
    the only address there is is 127.0.0.1, so the cluster cannot reach anything else.
    """
    name = f"tsray-{os.getpid()}"
    ip = shutil.which("ip")
    if ip is None or os.geteuid() != 0:
        pytest.skip(
            "the Ray test runs in its own loopback-only network namespace: needs root and iproute2"
        )
    made = subprocess.run([ip, "netns", "add", name], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot make a network namespace for the Ray test: {made.stderr.strip()}")
    subprocess.run([ip, "netns", "exec", name, ip, "link", "set", "lo", "up"], check=True)
    return name


def in_namespace(namespace: str, command: list[str]) -> list[str]:
    return ["ip", "netns", "exec", namespace, *command]


@pytest.fixture(scope="module")
def ray_address() -> Iterator[tuple[str, str]]:
    """(namespace, address) of a 2-CPU Ray head started inside a loopback-only namespace."""
    pytest.importorskip("ray", reason="the [scale] extra (hydra-ray-launcher, ray) is needed")
    namespace = _loopback_namespace()
    port = _free_port()
    temp = tempfile.mkdtemp(prefix="tsray", dir="/tmp")  # short: Ray's socket paths
    ray = Path(sys.executable).with_name("ray")
    start = subprocess.Popen(
        in_namespace(namespace, [
            str(ray), "start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}",
            "--num-cpus=2", "--num-gpus=0", "--object-store-memory=100000000",
            "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={temp}",
        ]),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        env={**os.environ, **RAY_ENV},
    )  # fmt: skip
    try:
        output = start.communicate(timeout=120)[0]
        assert start.returncode == 0, output[-3000:]
        yield namespace, f"127.0.0.1:{port}"
    finally:
        if start.poll() is None:
            start.kill()
        _stop_group(start.pid)  # the head's daemons stay in the group `ray start` made
        shutil.rmtree(temp, ignore_errors=True)
        subprocess.run(["ip", "netns", "delete", namespace], check=False)


def _sweep(
    tmp_path: Path, name: str, launcher: list[str], namespace: str | None = None
) -> dict[str, Any]:
    sweep_dir = tmp_path / name
    env = {k: v for k, v in os.environ.items() if not k.startswith("DVC_")}
    command = [
        sys.executable, "-m", "torchscan_stages.stages.crawl", "-m", *launcher, *GRID,
        f"hydra.sweep.dir={sweep_dir}",
    ]  # fmt: skip
    if namespace is not None:  # the Ray sweep joins its cluster inside the same namespace
        env.update(RAY_ENV)
        command = in_namespace(namespace, command)
    result = subprocess.run(
        command,
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=400, check=False,
    )  # fmt: skip
    assert result.returncode == 0, (name, result.stdout[-1500:], result.stderr[-3000:])
    summary: dict[str, Any] = load_report(sweep_dir / "sweep_summary.json").model_dump(mode="json")
    return summary


def _reports(summary: dict[str, Any]) -> set[tuple[Any, ...]]:
    """What the grid measured, per job: its axes and every totals figure with its status."""
    found = set()
    for job in summary["jobs"]:
        assert job["status"] == "completed", job
        metrics = tuple(sorted((k, m["status"], m["value"]) for k, m in job["metrics"].items()))
        found.add((tuple(sorted(job["axes"].items())), metrics))
    return found


@pytest.mark.ray
def test_a_2x2_grid_gives_the_same_reports_through_every_launcher(
    tmp_path: Path, ray_address: tuple[str, str]
) -> None:
    namespace, address = ray_address
    launchers = {
        "basic": [],
        "joblib": ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"],
        "submitit_local": ["hydra/launcher=submitit_local"],
        "ray": ["hydra/launcher=ray_cluster", f"hydra.launcher.ray.init.address={address}"],
    }
    results = {
        name: _reports(_sweep(tmp_path, name, args, namespace if name == "ray" else None))
        for name, args in launchers.items()
    }
    basic = results["basic"]
    assert len(basic) == 4  # 2 precisions x 2 seeds, one report each
    axes = sorted(dict(a)["precision"] + "/" + dict(a)["seed"] for a, _ in basic)
    assert axes == ["bf16/1", "bf16/2", "fp32/1", "fp32/2"]
    for name, found in results.items():
        assert found == basic, name  # same jobs, same figures, same statuses


def _run(cwd: Path, *cmd: str) -> str:
    done = subprocess.run(
        list(cmd), cwd=cwd, env=dvc_env(), capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, f"{cmd}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def _queued_grid(repo: Path, pipeline_repos: PipelineRepos) -> set[tuple[Any, ...]]:
    """The same grid as DVC experiments (queue, one worker): (precision, seed, metrics).

    From the reproduced pipeline with its outputs committed as the README says, as a user
    queues experiments: each starts from the committed dvc.lock and cache.
    """
    pipeline_repos.reproduced_copy(repo)
    commit_as_the_readme_says(repo)
    queued = _run(repo, "dvc", "exp", "run", "--queue", "crawl", *[
        arg for item in GRID for arg in ("-S", item)])  # fmt: skip
    assert queued.count("Queued experiment") == 4, queued  # 2 x 2: one per value (Hydra syntax)
    _run(repo, "dvc", "exp", "run", "--queue", "crawl", "-S", "crawl.mode=bogus")  # fails
    _run(repo, "dvc", "queue", "start", "-j", "1")
    deadline = time.monotonic() + 540  # a bound on a hang, not a timing claim
    while time.monotonic() < deadline:
        status = _run(repo, "dvc", "queue", "status")
        if not re.search(r"\b(Queued|Running)\b", status):
            break
        time.sleep(8)  # each poll is a `dvc` start-up (~1.5 CPU-s): not every 2 s
    assert status.count("Success") == 4 and status.count("Failed") == 1, status
    for task in re.findall(r"^(\w+)\s.*\bSuccess\b", status, re.M):
        log = _run(repo, "dvc", "queue", "logs", task)
        # the side pipelines are projects of their own: no missing-hash noise in the queue
        assert "No file hash info" not in log and "WARNING" not in log, log
    found = set()
    for commit in json.loads(_run(repo, "dvc", "exp", "show", "--json")):
        for experiment in commit.get("experiments") or []:
            for revision in experiment.get("revs") or []:
                data = revision.get("data") or {}
                params = (data.get("params") or {}).get("params.yaml", {}).get("data", {})
                metrics = (data.get("metrics") or {}).get("metrics/crawl.json", {}).get("data")
                if params["crawl"]["mode"] == "bogus":
                    continue  # the failed one: listed by the sweep report below
                precision = params["precision"]["name"]
                found.add((precision, str(params["seed"]), tuple(sorted(metrics.items()))))
    return found


def test_the_dvc_queue_gives_the_same_grid_as_a_multirun(
    tmp_path: Path, pipeline_repos: PipelineRepos
) -> None:
    summary = _sweep(tmp_path, "basic", [])
    multirun = {
        (
            row["axes"]["precision"], row["axes"]["seed"],
            tuple(sorted((k[len("crawl_"):], v) for k, v in row.items()
                         if k.startswith("crawl_"))),
        )
        for row in summary["jobs"]
    }  # fmt: skip
    assert len(multirun) == 4  # 2 precisions x 2 seeds
    assert (
        _queued_grid(tmp_path / "repo", pipeline_repos) == multirun
    )  # same jobs, same flat metrics
    out = tmp_path / "exp-summary"
    printed = _run(
        ROOT, sys.executable, "-m", "torchscan_stages.pipeline.sweep", str(out),
        "--dvc-experiments", str(tmp_path / "repo"),
    )  # fmt: skip
    assert "(5 jobs, 1 failed)" in printed  # 4 grid experiments + the failing one
    rows = load_report(out / "sweep_summary.json").model_dump(mode="json")["jobs"]
    failed = [row for row in rows if row["status"] == "failed"]
    assert len(failed) == 1 and failed[0]["axes"]["crawl.mode"] == "bogus"
    assert "crawl.mode" in failed[0]["error"] and "bogus" in failed[0]["error"], failed
    grid = {(r["axes"]["precision"], r["axes"]["seed"]) for r in rows if r not in failed}
    assert grid == {("fp32", "1"), ("fp32", "2"), ("bf16", "1"), ("bf16", "2")}
