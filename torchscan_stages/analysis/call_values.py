"""Readers of a call's values shared by the crawl, the module and the operator formulas.

One home each: :func:`first_tensor` (the first tensor of a nested value), :func:`arg` (a
positional-or-keyword argument) and :func:`tensor_sums` (parameter and buffer sums, each
tensor once). Pure and cheap: no torch dispatch, no flattening of whole values.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

import torch
from torch import nn
from torch.nn.parameter import is_lazy

from ._walk import named_modules
from .packed_params import holds_packed_weights, inner_storages, packed_tensors, storage_bytes
from .parametrized import parametrization_lists


def first_tensor(value: Any) -> torch.Tensor | None:
    """The first tensor in ``value`` in pytree order (arguments and outputs nest in lists,
    tuples and dicts), without flattening everything the way tree_flatten does."""
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (list, tuple)):
        items: Any = value
    elif isinstance(value, dict):
        items = value.values()
    else:
        return None
    for item in items:
        found = first_tensor(item)
        if found is not None:
            return found
    return None


def arg(
    args: tuple[Any, ...] | list[Any],
    kwargs: dict[str, Any],
    index: int,
    name: str,
    default: Any = None,
) -> Any:
    """Positional-or-keyword argument, as forward() or the dispatcher would bind it."""
    if len(args) > index:
        return args[index]
    return kwargs.get(name, default)


class TensorSums(NamedTuple):
    """Parameter and buffer sums over some modules, each tensor counted once."""

    parameters: int
    trainable_parameters: int
    parameter_bytes: int
    buffer_elements: int
    buffer_bytes: int
    parameter_sizes: tuple[tuple[int, int], ...]  # (id, numel) of each parameter counted


def tensor_sums(modules: Iterable[nn.Module], *, own_parametrizations: bool = False) -> TensorSums:
    """What ``parameters()`` and ``buffers()`` of ``modules`` give, summed, each tensor once
    (a tensor under two names or in two modules counts once), in one walk of ``_parameters``
    and ``_buffers`` (no generator chain).

    Quantized modules' packed weights (``quantize_dynamic``) count as frozen parameters by
    their storage bytes, and so do quantized tensor subclasses (torchao's int8/int4/fp8
    weights: their inner storages); ``own_parametrizations``: a parametrised module's originals
    (weight_norm's ``original0/1``) count as its own, for its one record. A lazy module's
    unmaterialised tensors (no size yet) are left out: ``totals.lazy_paths`` says so."""
    sizes: dict[int, int] = {}
    seen_buffers: set[int] = set()
    trainable = pbytes = buffers = bbytes = packed_numel = 0
    for sub in modules:
        own = list(sub._parameters.values())
        if own_parametrizations and "parametrizations" in sub._modules:
            for plist in parametrization_lists(sub):
                own.extend(plist.parameters())
        for p in own:
            if p is not None and id(p) not in sizes and not is_lazy(p):
                n = sizes[id(p)] = p.numel()
                trainable += n if p.requires_grad else 0
                pbytes += storage_bytes(p) if inner_storages(p) else n * p.element_size()
        if holds_packed_weights(sub):  # frozen: quantized weights take no gradient
            for tensor in packed_tensors(sub):
                packed_numel += tensor.numel()
                pbytes += storage_bytes(tensor)
        for b in sub._buffers.values():
            if b is not None and id(b) not in seen_buffers and not is_lazy(b):
                seen_buffers.add(id(b))
                buffers += b.numel()
                bbytes += storage_bytes(b) if inner_storages(b) else b.numel() * b.element_size()
    total = sum(sizes.values()) + packed_numel
    return TensorSums(total, trainable, pbytes, buffers, bbytes, tuple(sizes.items()))


def held_parameters(module: nn.Module) -> dict[str, int]:
    """Parameters of every module path's whole subtree, called or not, each tensor once.

    A report only knows the modules that ran; a child used through its weight alone (Mamba2's
    ``conv1d.weight`` read by a fused kernel, a weight-norm parametrisation) holds parameters
    the records never see, which the footer's total does count.
    """
    return {path: tensor_sums(sub.modules()).parameters for path, sub in named_modules(module)}


__all__ = ["TensorSums", "arg", "first_tensor", "held_parameters", "tensor_sums"]
