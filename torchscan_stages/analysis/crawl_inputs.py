"""The crawl's call checked before anything runs: its arguments, or inputs made from shapes.

``crawl_module`` takes either ``input_shape`` (batch-of-1 inputs generated here from a private
generator, on the model's dtype and device unless told otherwise) or ``args`` / ``kwargs``
(the caller's own values), never both; a bad argument is a TypeError or ValueError naming
it before the model is touched. ``fill_from_operators`` is checked here too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch
from torch import nn

from ..devices import resolve_device


def _shape_list(input_shape: Any) -> list[tuple[int, ...]]:
    """``input_shape`` as one shape per positional tensor; TypeError/ValueError otherwise."""

    def one(shape: Any, where: str) -> tuple[int, ...]:
        if not isinstance(shape, (tuple, list, torch.Size)):
            raise TypeError(f"{where} must be a tuple of ints, got {type(shape).__name__}")
        dims = []
        for dim in shape:
            if isinstance(dim, bool) or not isinstance(dim, int):
                raise TypeError(f"{where} must contain ints, got {dim!r} in {tuple(shape)!r}")
            if dim < 0:
                raise ValueError(f"{where} has a negative dimension: {tuple(shape)!r}")
            dims.append(dim)
        return tuple(dims)

    if not isinstance(input_shape, (tuple, list, torch.Size)):
        raise TypeError(
            "input_shape must be a tuple of ints (batch dimension excluded) or a list of such "
            f"tuples, got {type(input_shape).__name__}"
        )
    if input_shape and all(isinstance(s, (tuple, list, torch.Size)) for s in input_shape):
        return [one(s, f"input_shape[{i}]") for i, s in enumerate(input_shape)]
    return [one(input_shape, "input_shape")]


def _first_tensor_info(module: nn.Module) -> tuple[torch.dtype, torch.device]:
    for tensor in module.parameters():
        return tensor.dtype, tensor.device
    for buffer in module.buffers():
        return buffer.dtype, buffer.device
    return torch.float32, torch.device("cpu")


def _generate_inputs(
    module: nn.Module, shapes: list[tuple[int, ...]], dtype: Any, device: Any
) -> tuple[torch.Tensor, ...]:
    """Batch-of-1 inputs from a private generator (the global RNG is never touched)."""
    default_dtype, default_device = _first_tensor_info(module)
    if dtype is None:
        dtypes = [default_dtype] * len(shapes)
    elif isinstance(dtype, torch.dtype):
        dtypes = [dtype] * len(shapes)
    elif isinstance(dtype, (list, tuple)):
        if len(dtype) != len(shapes):
            raise ValueError(
                f"dtype has {len(dtype)} entries but input_shape gives {len(shapes)} inputs; "
                "pass one torch.dtype or one per input"
            )
        for i, item in enumerate(dtype):
            if not isinstance(item, torch.dtype):
                raise TypeError(f"dtype[{i}] must be a torch.dtype, got {item!r}")
        dtypes = list(dtype)
    else:
        raise TypeError(f"dtype must be a torch.dtype or a list of them, got {dtype!r}")
    # an absent device (cuda without a GPU) is a clear ValueError naming `device`
    target = resolve_device(device) if device is not None else default_device
    generator = torch.Generator().manual_seed(0)
    inputs = []
    for shape, item in zip(shapes, dtypes, strict=False):
        if item.is_floating_point or item.is_complex:
            tensor = torch.rand((1, *shape), generator=generator).to(item)
        else:  # integer/bool inputs: zeros, a valid index for any embedding
            tensor = torch.zeros((1, *shape), dtype=item)
        inputs.append(tensor.to(target))
    return tuple(inputs)


def prepare_call(
    module: Any,
    input_shape: Any,
    args: Any,
    kwargs: Any,
    dtype: Any,
    device: Any,
    mode: Any,
) -> tuple[tuple[Any, ...] | None, dict[str, Any]]:
    """The call's (args, kwargs); args None: no input was given (parameters only)."""
    if not isinstance(module, nn.Module):
        raise TypeError(f"module must be a torch.nn.Module, got {type(module).__name__}")
    if mode not in ("full", "structure"):
        raise ValueError(f"mode must be 'full' or 'structure', got {mode!r}")
    if input_shape is not None and args is not None:
        raise ValueError(
            "pass either input_shape (generated inputs) or args (your tensors), not both"
        )
    if kwargs is not None and not isinstance(kwargs, Mapping):
        raise TypeError(
            f"kwargs must be a mapping of keyword arguments, got {type(kwargs).__name__}"
        )
    call_kwargs = dict(kwargs or {})
    for key in call_kwargs:
        if not isinstance(key, str):
            raise TypeError(f"kwargs keys must be str, got {key!r}")
    if input_shape is None:
        if dtype is not None or device is not None:
            raise ValueError("dtype and device apply to generated inputs only; give input_shape")
        if args is None and kwargs is None:  # a parameters-only report
            return None, call_kwargs
        if args is None:
            return (), call_kwargs
        if isinstance(args, torch.Tensor):
            return (args,), call_kwargs
        if not isinstance(args, (tuple, list)):
            raise TypeError(
                f"args must be a tuple of positional arguments, got {type(args).__name__}"
            )
        return tuple(args), call_kwargs
    shapes = _shape_list(input_shape)
    return _generate_inputs(module, shapes, dtype, device), call_kwargs


def check_fill(fill: Any) -> bool | tuple[type[nn.Module], ...]:
    """``fill_from_operators``: False, True, or module classes; TypeError naming a bad item."""
    if isinstance(fill, bool):
        return fill
    if fill is None:
        return False
    if isinstance(fill, type) or not isinstance(fill, Iterable):
        raise TypeError(
            f"fill_from_operators must be True/False or a list of nn.Module classes, got {fill!r}"
        )
    classes = tuple(fill)
    for item in classes:
        if not (isinstance(item, type) and issubclass(item, nn.Module)):
            raise TypeError(f"fill_from_operators: {item!r} is not an nn.Module subclass")
    return classes
