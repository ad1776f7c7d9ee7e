"""Small helpers shared by the formula families (pure, cheap, no torch dispatch)."""

from __future__ import annotations

import torch

from ...report import Diagnostic
from ..call_values import arg as arg  # re-exported: the families import it from here
from ..call_values import first_tensor as first_tensor
from ..call_values import tensor_sums
from ..handlers import CallContext


def in_out(ctx: CallContext) -> tuple[torch.Tensor, torch.Tensor]:
    """The primary input and output tensors of a single-tensor layer."""
    x = first_tensor(ctx.args) if ctx.args else first_tensor(ctx.kwargs)
    y = first_tensor(ctx.output)
    if x is None or y is None:
        raise TypeError(f"{type(ctx.module).__name__} call without a tensor input/output")
    return x, y


def param_numel(module: torch.nn.Module) -> int:
    """Elements of the module's own parameters, each tensor once (read once per call)."""
    return tensor_sums((module,)).parameters


def subtree_param_numel(module: torch.nn.Module) -> int:
    """Elements of every parameter of ``module`` and its submodules, each tensor once."""
    return tensor_sums(module.modules()).parameters


def pointwise_rf() -> dict[str, int]:
    """Local receptive-field triple of a layer that maps each position to itself."""
    return {"receptive_field": 1, "effective_stride": 1, "effective_padding": 0}


def note(code: str, message: str, metric: str | None = None) -> Diagnostic:
    return Diagnostic(code=code, metric=metric, message=message)
