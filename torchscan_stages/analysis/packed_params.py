"""Weights that quantized modules keep outside ``_parameters``, by their real storage dtype.

``torch.ao.quantization.quantize_dynamic`` replaces ``nn.Linear`` / ``nn.LSTM`` with modules
that hold packed int8 (or fp16) weights in TorchBind objects: ``parameters()`` is empty, so a
parameter count read from it is a silent 0. Those modules expose the real tensors through
``_weight_bias()``; they are counted as the module's (frozen) parameters, with the bytes of
their storage: 1 per int8 element (plus per-channel scales and zero points when the scheme
has them), 2 per fp16 element, 4 per float32 bias element.

Tensor subclasses that store their values in other tensors of another dtype (torchao's
``Int8Tensor``, ``IntxUnpackedToInt8Tensor``, ``Float8Tensor``: a bf16 weight held as int8
or fp8 ``qdata`` with scales and zero points) take the bytes of those inner storages, not
``numel x element_size`` of the dtype they present (:func:`inner_storages`). A wrapper whose
inner tensor has its own dtype (DTensor's local shard) is not one of them.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import _disable_current_modes, is_traceable_wrapper_subclass

_PACKED: dict[type, bool] = {}


def holds_packed_weights(module: nn.Module) -> bool:
    """Is ``module`` one of torch.ao's quantized modules with packed weights (the layer, not
    its packed-parameter holder child)?"""
    cls = type(module)
    found = _PACKED.get(cls)
    if found is None:
        found = _PACKED[cls] = (
            cls.__module__.startswith("torch.ao.nn.quantized")
            and callable(getattr(cls, "_weight_bias", None))
            # the holder (LinearPackedParams) is a child of the module that owns it: once
            and not cls.__name__.endswith("PackedParams")
        )
    return found


def _flatten(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        return [t for item in value.values() for t in _flatten(item)]
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in _flatten(item)]
    return []


def packed_tensors(module: nn.Module) -> list[torch.Tensor]:
    """The packed weights and biases of a quantized module (empty for any other module).

    Unpacked outside any dispatch mode: the unpack operators are bookkeeping, not the
    model's work."""
    if not holds_packed_weights(module):
        return []
    with _disable_current_modes():
        return _flatten(module._weight_bias())  # type: ignore[operator]


def _inner(tensor: torch.Tensor) -> list[torch.Tensor]:
    names, _ = tensor.__tensor_flatten__()  # type: ignore[attr-defined]
    found: list[torch.Tensor] = []
    for name in names:
        inner = getattr(tensor, name)
        if isinstance(inner, torch.Tensor):
            found += _inner(inner) if is_traceable_wrapper_subclass(inner) else [inner]
    return found


def inner_storages(tensor: torch.Tensor) -> list[torch.Tensor]:
    """The plain tensors a wrapper subclass keeps its values in, when any holds another dtype
    than the one the subclass presents (torchao's ``qdata``, ``scale``, ``zero_point``; a
    jagged nested tensor's values and int64 offsets): its storage is theirs. Empty for a
    plain tensor and for a same-dtype wrapper (DTensor's local shard)."""
    if not is_traceable_wrapper_subclass(tensor):
        return []
    inner = _inner(tensor)
    return inner if any(t.dtype != tensor.dtype for t in inner) else []


def storage_bytes(tensor: torch.Tensor) -> int:
    """Bytes a tensor's values take in storage: elements x element size, plus the
    per-channel scales and zero points of a per-channel quantized tensor; a quantized
    tensor subclass's inner storages, each once."""
    inner = inner_storages(tensor)
    if inner:
        storages = {id(t.untyped_storage()): t.untyped_storage().nbytes() for t in inner}
        return sum(storages.values())
    size = tensor.numel() * tensor.element_size()
    if tensor.is_quantized and tensor.qscheme() in (
        torch.per_channel_affine,
        torch.per_channel_symmetric,
        torch.per_channel_affine_float_qparams,
    ):
        scales, zeros = tensor.q_per_channel_scales(), tensor.q_per_channel_zero_points()
        size += scales.numel() * scales.element_size() + zeros.numel() * zeros.element_size()
    return size
