"""Real validation of the DDP prediction: a 2-process DistributedDataParallel step on the
gloo backend (CPU, 127.0.0.1), each rank's measured tracked peak against the prediction."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from ddp_models import ddp_step

from torchscan_stages.predict.ddp import predict_ddp_peak_memory

pytestmark = pytest.mark.slow
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _run_ranks(world: int, out: Path, buffers: bool) -> list[int]:
    """Start ``world`` real DDP ranks, wait (timeout), tear all down, read their peaks."""
    port = _free_port()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(HERE), env.get("PYTHONPATH", "")])
    env["OMP_NUM_THREADS"] = "1"
    command = [sys.executable, str(HERE / "ddp_rank.py")]
    extra = ["buffers"] if buffers else []
    ranks = [
        subprocess.Popen(
            [*command, str(rank), str(world), str(port), str(out / f"rank{rank}.json"), *extra],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank in range(world)
    ]
    logs: list[str] = []
    try:
        for process in ranks:
            logs.append(process.communicate(timeout=300)[0])
    finally:
        for process in ranks:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=30)
    peaks = []
    for rank, process in enumerate(ranks):
        assert process.returncode == 0, f"rank {rank} exited {process.returncode}:\n{logs[rank]}"
        record = json.loads((out / f"rank{rank}.json").read_text(encoding="utf-8"))
        assert record["status"] == "complete"
        peaks.append(int(record["peak"]))
    return peaks


@pytest.mark.parametrize("buffers", [False, True])
def test_real_gloo_ddp_ranks_match_the_prediction(tmp_path: Path, buffers: bool) -> None:
    measured = _run_ranks(2, tmp_path, buffers)
    step = ddp_step(batch=2, tokens=64, buffers=buffers)
    predicted = predict_ddp_peak_memory(step, world_size=2, device="cpu")
    assert predicted.peak.status == "complete"
    buckets = predicted.by_category["gradient_buckets"].value
    assert buckets == predicted.by_category["gradients"].value  # one flat copy of every grad
    if buffers:  # the BatchNorm's running stats, broadcast at construction and every forward
        assert predicted.by_category["buffers"].value > 0
    for rank, peak in enumerate(measured):
        # the bar: within 3 % of each rank's measured cpu_tracked_tensors peak (seen
        # here: 13,678,592 B measured, 13,678,676 predicted; with a BatchNorm's buffers
        # 13,727,744 and 13,727,844; the 84 / 100 B are AdamW's step counters made from
        # Python literals, which the measured tracker cannot see)
        assert abs(predicted.peak.value - peak) <= 0.03 * peak, (rank, predicted.peak.value, peak)
        # without the buckets the prediction would miss by the buckets' 18 % of the peak
        assert abs(predicted.peak.value - buckets - peak) > 0.03 * peak
