"""The child processes the pipeline tests start: git and dvc under one environment, crawl sweeps.

dvc_env: the test venv's bin first on PATH, no inherited DVC_/TORCHSCAN_ variables or PYTHONPATH
(the children import the installed package), a fixed git identity, and no DVC analytics; the
session's own timing-lock folder (tests/conftest.py) is kept.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from child_env import clean_env

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def dvc_env(extra_path: Path | None = None) -> dict[str, str]:
    """A copy of os.environ for git/dvc children; ``extra_path`` becomes their PYTHONPATH."""
    env = clean_env()
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.update(
        GIT_AUTHOR_NAME="t",
        GIT_AUTHOR_EMAIL="t@localhost",
        GIT_COMMITTER_NAME="t",
        GIT_COMMITTER_EMAIL="t@localhost",
        DVC_NO_ANALYTICS="1",
    )
    env.pop("PYTHONPATH", None)
    if extra_path is not None:
        env["PYTHONPATH"] = str(extra_path)
    return env


def crawl_sweep(sweep_dir: Path, *overrides: str) -> subprocess.CompletedProcess[str]:
    """A Hydra multirun of the crawl stage from the repo root into ``sweep_dir``; never raises."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DVC_")}
    return subprocess.run(
        [
            sys.executable, "-m", "torchscan_stages.stages.crawl", "-m", *overrides,
            f"hydra.sweep.dir={sweep_dir}",
        ],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
