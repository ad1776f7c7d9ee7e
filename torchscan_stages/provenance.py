"""Environment capture, a stable environment hash, git state and runtime settings.

``environment_fingerprint`` must not import torch: the pipeline's env stage runs it on every
``dvc repro`` and must stay cheap. Versions come from package metadata instead.

Never: depends on a clock or a timestamp in the hash.
"""

from __future__ import annotations

import functools
import glob
import hashlib
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

from ._version import __version__
from .report import EnvironmentInfo, HostState, Provenance, RunContext, RuntimeState

FINGERPRINT_PACKAGES = ("torch", "numpy", "pydantic", "psutil", "jinja2")


def _distribution_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.lower().startswith(("model name", "hardware", "cpu model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _physical_cores() -> int | None:
    try:
        import psutil

        return psutil.cpu_count(logical=False)
    except Exception:  # psutil cannot tell on some platforms
        return None


def _accelerators() -> list[str]:
    """Accelerator names visible to the OS, read without importing torch or spawning tools."""
    names: list[str] = []
    for info in sorted(glob.glob("/proc/driver/nvidia/gpus/*/information")):
        try:
            with open(info, encoding="utf-8") as handle:
                for line in handle:
                    if line.startswith("Model:"):
                        names.append("cuda:" + line.split(":", 1)[1].strip())
        except OSError:
            continue
    if sys.platform == "darwin" and platform.machine() == "arm64":
        names.append("mps:apple-silicon")
    return names


@functools.lru_cache(maxsize=1)
def environment_info() -> EnvironmentInfo:
    """Hardware and software facts of this process, cached for its lifetime."""
    packages = {
        name: version
        for name in FINGERPRINT_PACKAGES
        if (version := _distribution_version(name)) is not None
    }
    return EnvironmentInfo(
        python_version=platform.python_version(),
        python_implementation=platform.python_implementation(),
        platform=f"{platform.system()}-{platform.release()}",
        machine=platform.machine(),
        cpu_model=_cpu_model(),
        cpu_count_logical=os.cpu_count(),
        cpu_count_physical=_physical_cores(),
        torch_version=packages.get("torch"),
        package_version=__version__,
        accelerators=_accelerators(),
        packages=packages,
    )


def environment_fingerprint() -> dict[str, Any]:
    """The environment as a plain, sorted dict: byte-identical when nothing changed."""
    return environment_info().model_dump(mode="json")


def environment_hash(fingerprint: dict[str, Any] | None = None) -> str:
    """A short stable hash of the environment fingerprint (sha256, 16 hex digits)."""
    if fingerprint is None:
        return _process_environment_hash()
    canonical = json.dumps(fingerprint, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


@functools.lru_cache(maxsize=1)
def _process_environment_hash() -> str:
    """This process's hash, once: every report asks for it, and its fingerprint is cached
    (environment_info), so hashing it again would only cost time (0.1 ms per report)."""
    return environment_hash(environment_fingerprint())


def environment_provenance() -> Provenance:
    """The environment alone as a provenance (no runtime, run, git or host): what the
    fingerprint reports (``reports/env.json``, ``reports/sources.json``) carry, so that they
    stay byte-identical while the environment does. Never imports torch."""
    info = environment_info()
    return Provenance(
        package_version=__version__,
        torch_version=info.torch_version,
        env_hash=environment_hash(),
        environment=info,
    )


def runtime_state() -> RuntimeState:
    """Torch settings that change results; read at measurement time."""
    import torch

    return RuntimeState(
        num_threads=torch.get_num_threads(),
        num_interop_threads=torch.get_num_interop_threads(),
        grad_enabled=torch.is_grad_enabled(),
        deterministic_algorithms=torch.are_deterministic_algorithms_enabled(),
        default_dtype=str(torch.get_default_dtype()).removeprefix("torch."),
    )


def git_state(cwd: str | os.PathLike[str] | None = None) -> tuple[str | None, bool | None]:
    """(commit, dirty) of the git work tree at ``cwd``; (None, None) outside a repository."""
    where = Path(cwd) if cwd is not None else Path.cwd()
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=where,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=where,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None, None
    return commit or None, bool(status.strip())


_current_run: RunContext | None = None


def set_run_context(run: RunContext | None) -> None:
    """Attach pipeline run context (config, revisions, seed, git) to later reports."""
    global _current_run
    _current_run = run


def build_provenance(
    run: RunContext | None = None, *, include_runtime: bool = True, host: HostState | None = None
) -> Provenance:
    """Provenance for a new report. ``run`` defaults to the context set by the pipeline;
    ``host`` is the host state a timing recorded (load, governor, other busy processes)."""
    info = environment_info()
    return Provenance(
        package_version=__version__,
        torch_version=info.torch_version,
        env_hash=environment_hash(),
        environment=info,
        runtime=runtime_state() if include_runtime else None,
        run=run if run is not None else _current_run,
        host=host,
    )
