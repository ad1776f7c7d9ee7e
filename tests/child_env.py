"""The environment a test's child process starts from (stage scripts, dvc, git, compose).

No inherited ``DVC_`` or ``TORCHSCAN_`` variable reaches a child (a developer's own
settings must not change what the tests see), except the session's own timing-lock folder
that tests/conftest.py sets: a child stage then never waits on the host's timing jobs.
"""

from __future__ import annotations

import os

TIMING_LOCK = "TORCHSCAN_TIMING_LOCK"


def clean_env(**extra: str) -> dict[str, str]:
    """os.environ less DVC_ and TORCHSCAN_ variables (the session lock kept), plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DVC_", "TORCHSCAN_"))}
    if TIMING_LOCK in os.environ:
        env[TIMING_LOCK] = os.environ[TIMING_LOCK]
    env.update(extra)
    return env
