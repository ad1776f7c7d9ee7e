"""The allocator model a prediction applies to every storage it sees.

CUDA's caching allocator hands out blocks whose size is the request rounded up to a
multiple of 512 bytes (``kMinBlockSize``; a 0-byte request allocates nothing), and
``torch.cuda.max_memory_allocated`` counts those rounded block sizes. What it does not
model: kernel workspaces (cuBLAS, cuDNN) that the allocator also serves, segment
fragmentation (that is ``memory_reserved``), and the ``roundup_power2_divisions`` option.
The CPU model rounds nothing, matching ``measure_peak_memory``'s ``cpu_tracked_tensors``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

CUDA_BLOCK_BYTES = 512


@dataclass(frozen=True, slots=True)
class AllocatorModel:
    """How one device's allocator turns a storage of ``n`` bytes into counted bytes."""

    device_type: str
    rounding_bytes: int  # 1: no rounding
    scope: str
    description: str

    def rounded(self, nbytes: int) -> int:
        """Bytes the allocator counts for one storage of ``nbytes``: 0 stays 0."""
        if nbytes <= 0:
            return 0
        step = self.rounding_bytes
        return -(-nbytes // step) * step


_MODELS = {
    "cuda": AllocatorModel(
        "cuda",
        CUDA_BLOCK_BYTES,
        "predicted_accelerator_allocated",
        "CUDA caching allocator: every storage rounded up to a multiple of 512 bytes, as "
        "torch.cuda.max_memory_allocated counts them; kernel workspaces (cuBLAS, cuDNN) and "
        "fragmentation (reserved memory) are not modelled",
    ),
    "cpu": AllocatorModel(
        "cpu",
        1,
        "predicted_cpu_tracked_tensors",
        "PyTorch-tracked CPU tensor storages, exact bytes (no allocator rounding), as "
        "measure_peak_memory's cpu_tracked_tensors scope counts them",
    ),
}


def allocator_model(device: str) -> AllocatorModel:
    """The model for ``device`` ("cuda", "cuda:1", "cpu"); anything else is refused, in one
    line, before anything runs (the device need not exist: nothing runs on it)."""
    try:
        resolved = torch.device(device)
    except (RuntimeError, ValueError, TypeError):
        raise ValueError(
            f"device={device!r} is not a valid device string; predictions take 'cuda', "
            "'cuda:N' (N an index >= 0) or 'cpu'"
        ) from None
    model = _MODELS.get(resolved.type)
    if model is None:
        raise ValueError(
            f"device={device!r}: predictions model the 'cuda' or 'cpu' allocator; "
            f"expected one of {sorted(_MODELS)}"
        )
    if resolved.type == "cpu" and resolved.index not in (None, 0):
        raise ValueError(f"device={device!r}: the CPU has no device index {resolved.index}")
    return model
