"""Models in other forms than an eager module on real data: compiled, scripted, data-free.

* ``torch.compile`` wraps a module in an ``OptimizedModule``; analysis runs the module it
  wraps (its layers, formulas and operators as written) and says so.
* A TorchScript module runs its graph without Python module hooks: parameters and operator
  FLOPs are still measured, per-layer records and module formulas are not; a diagnostic
  says exactly that.
* Models on the ``meta`` device or under ``FakeTensorMode`` run without data: every count
  here depends on shapes only, so the totals are the CPU's, and the report says so.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import nn

from ..report import Diagnostic
from .call_values import first_tensor


def unwrap_compiled(module: nn.Module) -> tuple[nn.Module, list[Diagnostic]]:
    """The eager module behind a ``torch.compile`` wrapper, with a diagnostic; else itself."""
    if type(module).__name__ != "OptimizedModule":  # first: a missing attribute costs a raise
        return module, []
    inner = getattr(module, "_orig_mod", None)
    if not isinstance(inner, nn.Module):
        return module, []
    return inner, [
        Diagnostic(
            code="compiled_module_unwrapped",
            severity="info",
            message=f"torch.compile wrapper analysed through the module it wraps "
            f"({type(inner).__name__}): layers, module formulas and operator FLOPs describe "
            "the model as written, not the compiled graph's fused kernels; time the "
            "compiled module itself with measure_latency",
        )
    ]


def scripted_diagnostics(module: nn.Module) -> list[Diagnostic]:
    """What a TorchScript module allows: parameters and operators, not layers."""
    if not isinstance(module, torch.jit.ScriptModule):
        return []
    return [
        Diagnostic(
            code="torchscript_module",
            severity="warning",
            metric="module_flops,macs,dmas,receptive_field",
            message=f"{type(module).__name__} is a TorchScript module: its graph runs without "
            "Python module hooks, so only the outermost call is recorded. Measured: "
            "parameters and buffers, operator FLOPs (operators still pass through torch's "
            "dispatch), and any workload measurement (latency, memory, RSS). Not measured: "
            "per-layer records, module formulas (FLOPs, MACs, DMAs) and receptive fields; "
            "analyse the eager nn.Module it was scripted from for those",
        )
    ]


def data_free_kind(values: Iterable[Any]) -> str | None:
    """``"meta"`` or ``"fake"`` when the first tensor among ``values`` holds no data."""
    first = first_tensor(list(values))
    return tensor_data_kind(first) if first is not None else None


def tensor_data_kind(tensor: torch.Tensor) -> str | None:
    """``"meta"`` or ``"fake"`` when ``tensor`` holds no data, else None."""
    if tensor.device.type == "meta":
        return "meta"
    if type(tensor).__name__ == "FakeTensor":
        return "fake"
    return None


def without_data_diagnostics(kind: str | None) -> list[Diagnostic]:
    """The report's note that it ran on shapes alone (``kind`` from data_free_kind)."""
    if kind is None:
        return []
    where = "meta tensors" if kind == "meta" else "fake tensors (FakeTensorMode)"
    extra = (
        " The meta device has no fused kernels: scaled_dot_product_attention runs its math "
        "decomposition there, so the all-work operator count can differ from the CPU's "
        "(tensor products do not); fake CPU tensors keep the CPU's kernel choices."
        if kind == "meta"
        else ""
    )
    return [
        Diagnostic(
            code="ran_without_data",
            severity="info",
            message=f"ran on {where}: shapes, dtypes and devices only, no values and no "
            "memory. Parameter counts and FLOPs depend on shapes alone." + extra,
        )
    ]
