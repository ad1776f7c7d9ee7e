"""Device resolution and synchronisation for workload measurement.

A measurement names the device whose work it must wait for and whose allocator it reads.
Asking for a device that is not there is an error, never a silent fallback to the CPU: a
"CUDA latency" silently measured on the CPU would be a fabricated number.

Never: falls back silently to the CPU.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .report import Diagnostic, ExecutionRecord

SUPPORTED_DEVICE_TYPES = ("cpu", "cuda", "mps")


def resolve_device(device: str | torch.device | None, *, argument: str = "device") -> torch.device:
    """Parse ``device`` ("cpu", "cuda", "cuda:1", "mps"; None means "cpu") and check it exists.

    Raises TypeError for a wrong type and ValueError for an unknown, unsupported or absent
    device, naming ``argument`` and the fix.
    """
    if device is None:
        return torch.device("cpu")
    if not isinstance(device, (str, torch.device)):
        raise TypeError(
            f"{argument} must be a str such as 'cpu', 'cuda', 'cuda:1' or 'mps', a torch.device "
            f"or None; got {type(device).__name__}"
        )
    try:
        resolved = torch.device(device)
    except (RuntimeError, ValueError) as error:
        raise ValueError(
            f"{argument}={device!r} is not a valid torch device string: {error}"
        ) from error
    if resolved.type not in SUPPORTED_DEVICE_TYPES:
        raise ValueError(
            f"{argument}={device!r}: device type {resolved.type!r} is not supported for "
            f"measurement; expected one of {list(SUPPORTED_DEVICE_TYPES)}"
        )
    if resolved.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(
                f"{argument}={device!r} was requested but CUDA is not available "
                f"(torch {torch.__version__}, torch.cuda.is_available() is False); measure on a "
                "machine with an NVIDIA GPU or pass device='cpu' — nothing falls back silently"
            )
        count = torch.cuda.device_count()
        index = resolved.index if resolved.index is not None else torch.cuda.current_device()
        if index >= count:
            raise ValueError(
                f"{argument}={device!r}: CUDA device index {index} does not exist "
                f"({count} visible device(s): 0..{count - 1})"
            )
        return torch.device("cuda", index)
    if resolved.type == "mps":
        if not torch.backends.mps.is_available():
            raise ValueError(
                f"{argument}={device!r} was requested but MPS is not available "
                "(torch.backends.mps.is_available() is False); pass device='cpu' or measure on "
                "Apple silicon — nothing falls back silently"
            )
        if resolved.index not in (None, 0):
            raise ValueError(f"{argument}={device!r}: MPS has only device index 0")
        return torch.device("mps")
    if resolved.index not in (None, 0):
        raise ValueError(f"{argument}={device!r}: the CPU has no device index {resolved.index}")
    return torch.device("cpu")


def device_label(device: torch.device) -> str:
    """A stable string for reports: 'cpu', 'cuda:0', 'mps'."""
    if device.type == "cuda":
        return f"cuda:{device.index if device.index is not None else 0}"
    return device.type


def make_synchronize(device: torch.device) -> Callable[[], None]:
    """A zero-argument function that waits until queued work on ``device`` has finished.

    CPU work is synchronous, so its synchroniser does nothing; CUDA and MPS work is
    asynchronous and must be waited for inside every timed region.
    """
    if device.type == "cuda":

        def _sync_cuda() -> None:
            torch.cuda.synchronize(device)

        return _sync_cuda
    if device.type == "mps":

        def _sync_mps() -> None:
            torch.mps.synchronize()

        return _sync_mps

    def _sync_cpu() -> None:
        return None

    return _sync_cpu


def unsynchronized_accelerator(device: torch.device, metric: str) -> Diagnostic | None:
    """A warning when the workload used CUDA but timing was told the CPU (device=None).

    CUDA kernels run asynchronously: without device="cuda" only their launches are timed.
    Checked after the workload ran (CUDA initialised in this process); never changes device.
    """
    if device.type != "cpu" or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return None
    return Diagnostic(
        code="accelerator_not_synchronized",
        severity="warning",
        metric=metric,
        message="CUDA is in use in this process but the measurement device is the CPU "
        "(device=None): asynchronous CUDA work was not synchronised inside the timed region, "
        "so GPU time may be missing; pass device='cuda'",
    )


def is_synchronized(device: torch.device) -> bool:
    """Whether timing on ``device`` needs (and gets) an explicit synchronise."""
    return device.type in ("cuda", "mps")


def execution_record(
    device: torch.device,
    calls: dict[str, int],
    *,
    precision: str | None = None,
    training: bool | None = None,
    workload_grad_enabled: bool | None = None,
) -> ExecutionRecord:
    """How the workload ran: device, threads and grad mode read now (never changed), calls."""
    return ExecutionRecord(
        device=device_label(device),
        precision=precision,
        num_threads=torch.get_num_threads(),
        num_interop_threads=torch.get_num_interop_threads(),
        grad_enabled=torch.is_grad_enabled(),
        training=training,
        calls=dict(calls),
        workload_grad_enabled=workload_grad_enabled,
    )


def check_workload(workload: object, *, argument: str = "workload") -> None:
    """A workload is a zero-argument callable; refuse anything else before running it."""
    if not callable(workload):
        raise TypeError(
            f"{argument} must be a zero-argument callable that runs one unit of work, "
            f"got {type(workload).__name__}"
        )
