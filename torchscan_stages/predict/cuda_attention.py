"""Which scaled_dot_product_attention kernel CUDA would run, and that kernel's own op.

On a CPU fake run, ``F.scaled_dot_product_attention`` takes the CPU's choice (its flash
kernel, or the math decomposition when there is dropout), whose saved tensors differ from
CUDA's: the math path keeps the whole attention matrix, CUDA's flash kernel keeps a
``[B, H, L]`` fp32 logsumexp, the memory-efficient one a logsumexp padded to a multiple of
32. ``choose`` follows torch's ``select_sdp_backend`` (aten/src/ATen/native/transformers/
cuda/sdp_utils.cpp) for one assumed GPU, ``ASSUMED_GPU``; ``run`` calls the chosen
backend's own aten op, so the fake run keeps what that kernel's meta function returns and
autograd saves, and its backward runs the backend's backward meta function.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

ASSUMED_GPU = (
    "an sm80 (A100-class) GPU and torch's default SDPA priority order: flash, then "
    "memory-efficient, then math (torch prefers cuDNN attention first only on sm90/sm100 "
    "with cuDNN newer than 9.15)"
)
FLASH, EFFICIENT, MATH = "flash", "memory_efficient", "math"
_aten = torch.ops.aten


@dataclass(frozen=True, slots=True)
class Call:
    """One SDPA call's arguments, as ``F.scaled_dot_product_attention`` takes them."""

    query: torch.Tensor
    key: torch.Tensor
    value: torch.Tensor
    attn_mask: torch.Tensor | None = None
    dropout_p: float = 0.0
    is_causal: bool = False
    scale: float | None = None
    enable_gqa: bool = False


def call_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Call:
    """The call's arguments by name (positional or keyword, as torch accepts them)."""
    names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale")
    bound = dict(zip(names, args, strict=False)) | dict(kwargs)
    return Call(**bound)


def _dense_4d(call: Call) -> bool:
    tensors = (call.query, call.key, call.value)
    return all(t.dim() == 4 and not t.is_nested and t.numel() > 0 for t in tensors)


def _heads(call: Call) -> str | None:
    """ "same" (one batch, the same heads), "grouped" (``enable_gqa``: query heads a multiple
    of the key's and value's), or None (what torch refuses)."""
    q, k, v = call.query, call.key, call.value
    if not (q.size(0) == k.size(0) == v.size(0)):
        return None
    if q.size(1) == k.size(1) == v.size(1):
        return "same"
    grouped = k.size(1) == v.size(1) and q.size(1) % k.size(1) == 0
    return "grouped" if call.enable_gqa and grouped else None


def _stride_ok(t: torch.Tensor, ignore_singleton: bool) -> bool:
    return t.stride(-1) == 1 or (ignore_singleton and t.size(-1) == 1)


def can_flash(call: Call) -> tuple[bool, str]:
    """sdp_utils' ``can_use_flash_attention`` on sm80, for a dense call."""
    q, k, v = call.query, call.key, call.value
    if call.attn_mask is not None:
        return False, "an attn_mask (flash takes none)"
    if not (q.size(-1) == k.size(-1) == v.size(-1) and q.size(-1) <= 256):
        return False, "head dims differ or exceed 256"
    if call.is_causal and q.size(-2) != k.size(-2):
        return False, "is_causal with seqlen_q != seqlen_k"
    if not all(t.dtype in (torch.float16, torch.bfloat16) for t in (q, k, v)):
        return False, f"dtype {q.dtype} (flash takes fp16/bf16)"
    if not all(_stride_ok(t, True) for t in (q, k, v)):
        return False, "last dim not contiguous"
    return True, ""


def can_efficient(call: Call) -> tuple[bool, str]:
    """sdp_utils' ``can_use_mem_efficient_attention`` on sm80, for a dense call."""
    q, k, v = call.query, call.key, call.value
    if not all(t.dtype in (torch.float16, torch.bfloat16, torch.float32) for t in (q, k, v)):
        return False, f"dtype {q.dtype}"
    half = q.dtype in (torch.float16, torch.bfloat16)
    align = 8 if half else 4  # minimum_gemm_alignment on sm80 with tensor cores
    if not (q.size(-1) == k.size(-1) and q.size(-1) % align == 0 and v.size(-1) % align == 0):
        return False, f"head dims not equal multiples of {align}"
    align_bytes = align * q.element_size()
    if any((t.storage_offset() * t.element_size()) % align_bytes for t in (q, k, v)):
        return False, f"storage offsets not aligned to {align_bytes} bytes"
    if not all(_stride_ok(t, False) for t in (q, k, v)):
        return False, "last dim not contiguous"
    return True, ""


def choose(call: Call) -> tuple[str | None, str]:
    """(backend, why) on ``ASSUMED_GPU``; None where the call is outside what is modelled
    (not dense 4-D, mismatched batch or heads, a padded flash call, grouped-query on the
    memory-efficient kernel): its CPU kernels are kept, with a warning."""
    heads = _heads(call) if _dense_4d(call) else None
    if heads is None:
        return None, "not a dense 4-D call with matching batch and heads"
    flash, why_not_flash = can_flash(call)
    if flash and call.query.size(-1) % 8:
        return None, "flash with a head dim not a multiple of 8 (CUDA pads q, k, v)"
    if flash:
        return FLASH, "fp16/bf16, no mask"
    efficient, why_not_efficient = can_efficient(call)
    if efficient and heads == "grouped":
        return None, "grouped-query attention on the memory-efficient kernel"
    if efficient:
        return EFFICIENT, f"not flash: {why_not_flash}"
    return MATH, f"not flash: {why_not_flash}; not memory-efficient: {why_not_efficient}"


def gpu_independent(call: Call, backend: str) -> bool:
    """True when no sm80-or-newer GPU would choose otherwise: math in fp32 (flash and cuDNN
    attention need fp16/bf16) with head dims the memory-efficient kernel's fp32 alignment
    of 4 refuses. (A pre-sm80 GPU aligns fp32 to 1 and could take that kernel.)"""
    q, v = call.query, call.value
    unaligned = q.size(-1) % 4 != 0 or v.size(-1) % 4 != 0
    return backend == MATH and q.dtype == torch.float32 and unaligned


def _attn_bias(call: Call) -> torch.Tensor | None:
    """The mask as the memory-efficient kernel takes it: a float bias (a bool mask becomes
    0 / -inf in the query's dtype, as ``convert_boolean_attn_mask`` does)."""
    mask = call.attn_mask
    if mask is None or mask.dtype != torch.bool:
        return mask
    bias = torch.zeros(mask.shape, dtype=call.query.dtype, device=mask.device)
    return bias.masked_fill(mask.logical_not(), float("-inf"))


def run(call: Call, backend: str) -> torch.Tensor:
    """The attention output, computed by ``backend``'s own aten op (under the fake mode)."""
    q = call.query
    if backend == FLASH:
        return _aten._scaled_dot_product_flash_attention(
            q, call.key, call.value, call.dropout_p, call.is_causal, False, scale=call.scale
        )[0]
    if backend == EFFICIENT:
        grad = torch.is_grad_enabled() and any(t.requires_grad for t in (q, call.key, call.value))
        return _aten._scaled_dot_product_efficient_attention(
            q, call.key, call.value, _attn_bias(call), grad, call.dropout_p, call.is_causal,
            scale=call.scale,
        )[0]  # fmt: skip
    return _aten._scaled_dot_product_attention_math(
        q, call.key, call.value, call.attn_mask, call.dropout_p, call.is_causal, None,
        scale=call.scale, enable_gqa=call.enable_gqa,
    )[0]  # fmt: skip


def saved_bytes(call: Call, backend: str, training: bool) -> int:
    """The bytes the backend keeps for backward besides q, k, v and the output (exact
    storage bytes, before allocator rounding): flash's ``[B, H, Lq]`` fp32 logsumexp,
    the memory-efficient kernel's ``[B, H, ceil(Lq / 32) * 32]``; 0 for math (its
    saved tensors are the decomposition's) and for a forward without gradients."""
    if not training or backend == MATH:
        return 0
    b, h, lq = call.query.size(0), call.query.size(1), call.query.size(2)
    return 4 * b * h * (lq if backend == FLASH else -(-lq // 32) * 32)
