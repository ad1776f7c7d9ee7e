"""Dynamic batching of a model's forward: a batched handler from a per-request forward.

Each sample is ``(args, kwargs)`` of one request. The batched handler concatenates every
tensor argument along dim 0 across the gathered requests, runs the forward once, and splits
the output back by each request's own dim-0 size (tensors, tuples/lists and mappings of
them such as a Hugging Face ModelOutput; a value without the batch on dim 0, such as a KV
cache object, is the whole batch's and goes to every request as it is). Non-tensor
arguments must be equal across the batch (they are passed once).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from .server import ContractError

Sample = tuple[tuple[Any, ...], dict[str, Any]]


def single_forward(forward: Callable[..., Any]) -> Callable[[Sample], Any]:
    """The handler of one request: ``forward(*args, **kwargs)``."""

    def handler(sample: Sample) -> Any:
        args, kwargs = sample
        return forward(*args, **kwargs)

    return handler


def stacked_forward(forward: Callable[..., Any]) -> Callable[[list[Sample]], list[Any]]:
    """The batched handler: one forward over the requests' inputs stacked on dim 0."""

    def handler(samples: list[Sample]) -> list[Any]:
        if len(samples) == 1:
            args, kwargs = samples[0]
            return [forward(*args, **kwargs)]
        sizes = [_rows(sample) for sample in samples]
        args = tuple(
            _stack([s[0][i] for s in samples], f"args[{i}]") for i in range(len(samples[0][0]))
        )
        kwargs = {key: _stack([s[1][key] for s in samples], key) for key in samples[0][1]}
        return split_output(forward(*args, **kwargs), sizes)

    return handler


def _rows(sample: Sample) -> int:
    for value in (*sample[0], *sample[1].values()):
        if isinstance(value, torch.Tensor) and value.dim() > 0:
            return int(value.shape[0])
    raise ContractError("a batched request needs a tensor argument with a batch dimension")


def _stack(values: list[Any], where: str) -> Any:
    if all(isinstance(v, torch.Tensor) and v.dim() > 0 for v in values):
        return torch.cat(values, dim=0)
    if any(v is not values[0] and v != values[0] for v in values):
        raise ContractError(f"batched requests differ in the non-tensor argument {where}")
    return values[0]


def split_output(output: Any, sizes: Sequence[int]) -> list[Any]:
    """One output per request: tensors with the batch on dim 0 split by ``sizes``, tuples,
    lists and mappings split item by item; anything else (a KV cache object, a scalar) is
    the whole batch's and handed to every request as it is."""
    if isinstance(output, torch.Tensor):
        if output.dim() > 0 and output.shape[0] == sum(sizes):
            return list(torch.split(output, list(sizes), dim=0))
        return [output] * len(sizes)
    if isinstance(output, (tuple, list)):
        parts = [split_output(item, sizes) for item in output]
        return [type(output)(part[i] for part in parts) for i in range(len(sizes))]
    if isinstance(output, Mapping):
        split = {key: split_output(value, sizes) for key, value in output.items()}
        return [{key: pieces[i] for key, pieces in split.items()} for i in range(len(sizes))]
    return [output] * len(sizes)
