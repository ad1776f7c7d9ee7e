"""Backward of the reflection and replication pads (their forwards are zero-FLOP selects).

A padded position copies an input position, so in backward each padded position's gradient
is added into the input position it copied: ``grad_output.numel() - grad_input.numel()``
adds, no tensor products (Encodec's reflect-padded convolutions in training).
"""

from __future__ import annotations

from typing import Any

from ._registry import convention, formula, numel

convention(
    "padding",
    "reflection/replication pad backward: 1 add per padded position (its gradient summed "
    "into the position it copied); the forwards are zero-FLOP selects",
)


@formula(
    "reflection_pad1d_backward",
    "reflection_pad2d_backward",
    "reflection_pad3d_backward",
    "replication_pad1d_backward",
    "replication_pad2d_backward",
    "replication_pad3d_backward",
)
def pad_backward(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    """(grad_output, self, padding): one add per padded element of grad_output."""
    grad_output = args[0] if args else kwargs["grad_output"]
    return max(numel(grad_output) - numel(out), 0)
