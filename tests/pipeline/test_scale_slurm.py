"""The SLURM launcher config renders a real sbatch script through submitit's own code.

No cluster here: a stand-in ``sbatch`` on PATH saves the script submitit hands it and
answers as sbatch does; the sweep is then stopped (it would wait for the cluster).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]

FAKE_SBATCH = """#!/bin/sh
cp "$1" "$SBATCH_CAPTURE.tmp" && mv "$SBATCH_CAPTURE.tmp" "$SBATCH_CAPTURE"
echo "Submitted batch job 4242"
"""
# submitit checks that srun exists before it builds anything; this one is never run.
FAKE_SRUN = """#!/bin/sh
echo "stand-in srun: no cluster here" >&2
exit 1
"""


def _stand_in_env(tmp_path: Path, capture: Path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("sbatch", FAKE_SBATCH), ("srun", FAKE_SRUN)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DVC_")}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env['PATH']}", SBATCH_CAPTURE=str(capture))
    return env


def _submit(tmp_path: Path, overrides: list[str]) -> str:
    capture = tmp_path / "captured.sbatch"
    env = _stand_in_env(tmp_path, capture)
    command = [
        sys.executable, "-m", "torchscan_stages.stages.crawl", "-m", "hydra/launcher=slurm",
        *overrides, f"hydra.sweep.dir={tmp_path / 'sweep'}",
    ]  # fmt: skip
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        deadline = time.monotonic() + 180  # a bound on a hang, not a timing claim
        while not capture.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        process.kill()
        output = process.communicate()[0]
    assert capture.exists(), output[-3000:]
    return capture.read_text()


def test_slurm_config_renders_an_sbatch_script_with_its_settings(tmp_path: Path) -> None:
    script = _submit(
        tmp_path,
        [
            "hydra.launcher.partition=gpu_a100", "hydra.launcher.timeout_min=90",
            "hydra.launcher.gpus_per_node=1", "hydra.launcher.cpus_per_task=8",
            "hydra.launcher.array_parallelism=2", "threads=1,2,4",
        ],
    )  # fmt: skip
    flags = dict(re.findall(r"^#SBATCH --([\w-]+)(?:=(.*))?$", script, flags=re.M))
    assert script.startswith("#!/bin/bash")
    assert flags["partition"] == "gpu_a100"
    assert flags["time"] == "90"  # minutes, as the config gave them
    assert flags["gpus-per-node"] == "1"
    assert flags["cpus-per-task"] == "8"
    assert flags["array"] == "0-2%2"  # 3 jobs (threads=1,2,4), at most 2 at once
    assert "submitit.core._submit" in script  # the job body is submitit's own runner
    syntax = subprocess.run(["bash", "-n", "-c", script], capture_output=True, text=True)
    assert syntax.returncode == 0, syntax.stderr


def test_slurm_defaults_leave_the_partition_to_the_cluster(tmp_path: Path) -> None:
    script = _submit(tmp_path, ["threads=1,2"])
    assert "#SBATCH --partition" not in script  # null: sbatch uses the cluster's default
    assert "#SBATCH --array=0-1%2" in script  # 2 jobs, array_parallelism 8 capped at 2
    assert "#SBATCH --time=60" in script  # conf/hydra/launcher/slurm.yaml timeout_min
