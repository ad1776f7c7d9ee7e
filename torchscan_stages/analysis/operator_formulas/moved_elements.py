"""Elements a zero-FLOP data-movement operator reads and writes: a module's own DMAs.

A module without a handler whose own forward only moves data (a packed-sequence model's
``pack_padded_sequence`` and ``pad_packed_sequence``, a ``torch.cat``) does no arithmetic,
but its DMAs are not zero. For the operators below (and ``packed_sequence.py``'s) the count
is exact under the DMA convention (elements, each read and each written once): a gather
reads the rows it keeps and its indices and writes its output; a copy reads its source and
writes its destination; a fill writes its output; an allocation writes nothing. A module's
own DMAs are then the sum over the operators it ran itself, complete when every data-moving
one is listed here, else a lower bound with an ``unmodelled_data_movement`` diagnostic (as
before).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ._registry import IGNORED, Packet, RawFormula, arg, numel

MOVED: dict[Packet, RawFormula] = {}


def moved(*names: str) -> Callable[[RawFormula], RawFormula]:
    """Register an elements-moved formula for zero-FLOP (ignored) ``aten.<name>`` packets."""

    def register(fn: RawFormula) -> RawFormula:
        for name in names:
            packet = getattr(torch.ops.aten, name, None)
            packets = [packet] if packet is not None and packet in IGNORED else []
            if not packets:
                raise RuntimeError(f"moved(): aten.{name} is not a zero-FLOP operator")
            for packet in packets:
                MOVED[packet] = fn
        return fn

    return register


@moved("copy_")
def _copy(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    """Read the source, write the destination."""
    return numel(arg(args, kwargs, 1, "src")) + numel(out)


@moved("full", "zeros", "ones", "full_like", "zeros_like", "ones_like", "fill_", "arange")
def _fill(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    """Write the output's elements (constants or a range): nothing read."""
    return numel(out)


@moved("empty", "empty_like", "empty_strided", "new_empty")
def _allocate(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    """An allocation writes nothing."""
    return 0


@moved("index_select")
def _index_select(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    """Read the index and the selected elements, write them."""
    return numel(arg(args, kwargs, 2, "index")) + 2 * numel(out)


@moved("index")
def _index(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    """Read the index tensors and the selected elements, write them."""
    indices = arg(args, kwargs, 1, "indices") or ()
    return numel([i for i in indices if i is not None]) + 2 * numel(out)


@moved("cat", "stack")
def _concatenate(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    """Read every input, write the output."""
    return numel(arg(args, kwargs, 0, "tensors")) + numel(out)
