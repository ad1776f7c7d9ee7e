"""``save_on_cpu`` under a CUDA prediction: saved activations move to host memory.

``torch.autograd.graph.save_on_cpu()`` packs every tensor autograd saves into a host copy
(``tensor.cpu()``) and unpacks it back to the device in backward. On a CPU fake run the
host copy of a CPU tensor is the tensor itself, so the device bytes were predicted as if
nothing had moved (the issue: the same figure with and without it, and no word). During a
CUDA prediction ``save_on_cpu`` is replaced by hooks that do what CUDA's would: pack keeps
only the tensor's metadata and counts its bytes in a separate host-memory figure (live from
the pack until the graph drops it), so the device storage is freed when the forward drops
it; unpack allocates the device copy that ``tensor.to(device)`` makes, which the tracker
counts. The host figure (``host_bytes``) is reported beside the device peak, never in it.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.autograd.graph as graph
from torch._prims_common import is_non_overlapping_and_dense_or_false


@dataclass(eq=False)
class HostMemory:
    """Live and peak bytes of saved tensors held in host memory."""

    current: int = 0
    peak: int = 0
    packed: int = 0  # tensors packed

    def add(self, nbytes: int) -> None:
        self.current += nbytes
        self.packed += 1
        self.peak = max(self.peak, self.current)

    def release(self, nbytes: int) -> None:
        self.current -= nbytes


class _HostCopy:
    """What a packed tensor leaves in the graph: its metadata; its bytes count as host
    memory until the graph drops this object."""

    def __init__(self, tensor: torch.Tensor, host: HostMemory) -> None:
        self.shape, self.dtype, self.device = tuple(tensor.shape), tensor.dtype, tensor.device
        dense = is_non_overlapping_and_dense_or_false(tensor)  # .cpu() keeps dense strides
        self.stride = tuple(tensor.stride()) if dense else None
        nbytes = tensor.numel() * tensor.element_size()  # the host copy: the view's elements
        host.add(nbytes)
        weakref.finalize(self, host.release, nbytes)

    def unpacked(self) -> torch.Tensor:
        """The device copy ``tensor.to(device)`` makes in backward (the tracker counts it)."""
        if self.stride is None:
            return torch.empty(self.shape, dtype=self.dtype, device=self.device)
        return torch.empty_strided(self.shape, self.stride, dtype=self.dtype, device=self.device)


@contextlib.contextmanager
def saved_on_host(enabled: bool) -> Iterator[HostMemory | None]:
    """While entered (a CUDA prediction): ``save_on_cpu`` moves saved tensors to the host
    figure. Yields that figure, or None when not enabled."""
    if not enabled:
        yield None
        return
    host = HostMemory()
    original = graph.save_on_cpu

    class save_on_cpu(graph.saved_tensors_hooks):
        def __init__(self, pin_memory: bool = False, device_type: str = "cuda") -> None:
            def pack(tensor: torch.Tensor) -> Any:
                return _HostCopy(tensor, host)

            def unpack(packed: Any) -> torch.Tensor:
                return packed.unpacked()  # type: ignore[no-any-return]

            super().__init__(pack, unpack)

    graph.save_on_cpu = save_on_cpu  # type: ignore[misc, assignment]
    try:
        yield host
    finally:
        graph.save_on_cpu = original  # type: ignore[misc, assignment]
