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
    ``sum(p.numel() for p in module.parameters())`` gives, without its generator chain: one
    loop over a list that grows, sizes keyed by tensor id)."""
    sizes: dict[int, int] = {}
    stack: list[torch.nn.Module | None] = [module]
    for sub in stack:  # the list grows while it is read: a breadth-first walk
        if sub is None:
            continue
        params = sub._parameters
        if params:
            for p in params.values():
                if p is not None:
                    sizes[id(p)] = p.numel()
        children = sub._modules
        if children:
            stack.extend(children.values())
    return sum(sizes.values())


def pointwise_rf() -> dict[str, int]:
    """Local receptive-field triple of a layer that maps each position to itself."""
    return {"receptive_field": 1, "effective_stride": 1, "effective_padding": 0}


def note(code: str, message: str, metric: str | None = None) -> Diagnostic:
    return Diagnostic(code=code, metric=metric, message=message)
