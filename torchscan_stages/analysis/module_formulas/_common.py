"""Small helpers shared by the formula families (pure, cheap, no torch dispatch)."""

from __future__ import annotations

from typing import Any

import torch

from ...report import Diagnostic
from ..handlers import CallContext


def first_tensor(value: Any) -> torch.Tensor | None:
    """The first tensor in a (possibly nested) value, depth first."""
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (tuple, list)):
        for item in value:
            found = first_tensor(item)
            if found is not None:
                return found
    if isinstance(value, dict):
        for item in value.values():
            found = first_tensor(item)
            if found is not None:
                return found
    return None


def arg(ctx: CallContext, index: int, name: str, default: Any = None) -> Any:
    """Positional-or-keyword argument of the call, as forward() would bind it."""
    if len(ctx.args) > index:
        return ctx.args[index]
    return ctx.kwargs.get(name, default)


def in_out(ctx: CallContext) -> tuple[torch.Tensor, torch.Tensor]:
    """The primary input and output tensors of a single-tensor layer."""
    x = first_tensor(ctx.args) if ctx.args else first_tensor(ctx.kwargs)
    y = first_tensor(ctx.output)
    if x is None or y is None:
        raise TypeError(f"{type(ctx.module).__name__} call without a tensor input/output")
    return x, y


def param_numel(module: torch.nn.Module) -> int:
    """Elements of the module's own parameters (read once per call)."""
    unique = {id(p): p for p in module._parameters.values() if p is not None}
    return sum(p.numel() for p in unique.values())  # a tensor under two names counts once


def subtree_param_numel(module: torch.nn.Module) -> int:
    """Elements of every parameter of ``module`` and its submodules, each tensor once (what
    ``sum(p.numel() for p in module.parameters())`` gives, without its generator chain)."""
    seen: set[int] = set()
    total = 0
    stack = [module]
    while stack:
        sub = stack.pop()
        for p in sub._parameters.values():
            if p is not None and id(p) not in seen:
                seen.add(id(p))
                total += p.numel()
        stack.extend(child for child in sub._modules.values() if child is not None)
    return total


def pointwise_rf() -> dict[str, int]:
    """Local receptive-field triple of a layer that maps each position to itself."""
    return {"receptive_field": 1, "effective_stride": 1, "effective_padding": 0}


def note(code: str, message: str, metric: str | None = None) -> Diagnostic:
    return Diagnostic(code=code, metric=metric, message=message)
