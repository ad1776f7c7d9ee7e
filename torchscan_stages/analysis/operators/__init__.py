"""Operator FLOPs over torch's dispatch (see :mod:`.counter`)."""

from __future__ import annotations

from .counter import (
    Flops,
    OperatorCounter,
    OwnerKey,
    OwnerOps,
    StackOwner,
    _ModuleStack,  # noqa: F401
    _roll_up,  # noqa: F401
    classify_custom_mapping,
    count_workload,
    measure_flops,
)

__all__ = [
    "Flops",
    "OperatorCounter",
    "OwnerKey",
    "OwnerOps",
    "StackOwner",
    "classify_custom_mapping",
    "count_workload",
    "measure_flops",
]
