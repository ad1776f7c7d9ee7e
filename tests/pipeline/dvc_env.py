"""The environment the pipeline tests run git and dvc under, shared by their child processes.

The test venv's bin first on PATH, no inherited DVC_/TORCHSCAN_ variables or PYTHONPATH (the
children import the installed package), a fixed git identity, and no DVC analytics.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

BIN = Path(sys.executable).parent


def dvc_env(extra_path: Path | None = None) -> dict[str, str]:
    """A copy of os.environ for git/dvc children; ``extra_path`` becomes their PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DVC_", "TORCHSCAN_"))}
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
