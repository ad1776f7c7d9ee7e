"""Attention kernels and the fused CPU transformer paths.

Convention: attention counts what the decomposed (math) path counts, so fast and slow paths
agree: the two batched products (torch's ``sdpa_flop_count``: 4*b*h*s_q*s_k*d), scaling q and
k (1 per element each), softmax (5 per score), an additive mask (1 per score) and dropout (1
per score) when present. Backward uses torch's ``sdpa_backward_flop_count`` (five products,
the score recomputation included, as torch counts its flash/efficient backward) plus softmax
backward (4 per score) and the scale (1 per element of q and k). The fused encoder layer and
multi-head attention count each of their stages with the formula of the separate operator
that the slow path would run (in-projection, attention, out-projection, residual adds, layer
norms, feed-forward, activation), so totals are path-independent.
"""

from __future__ import annotations

from typing import Any

import torch

from ._registry import Flops, arg, convention, numel, register_formula
from .norms import norm_forward_flops
from .softmax import SOFTMAX_BACKWARD_FLOPS_PER_ELEMENT, SOFTMAX_FLOPS_PER_ELEMENT

convention(
    "attention",
    "2 batched products (torch's sdpa formula) + q/k scaling 1/element + softmax 5/score "
    "(+1/score mask, +1/score dropout); backward: torch's 5-product formula + softmax "
    "backward 4/score + scaling; fused encoder layer / MHA = sum of their slow-path stages",
)


def sdpa_products(
    q_shape: tuple[int, ...], k_shape: tuple[int, ...], v_shape: tuple[int, ...]
) -> int:
    """torch's ``sdpa_flop_count`` (q @ k^T and scores @ v, GQA-aware), without its pytree
    shape wrapper on the hot path; tests check the two agree."""
    b, h, s_q, d = q_shape
    s_k, d_v = k_shape[-2], v_shape[-1]
    return 2 * b * h * s_q * s_k * d + 2 * b * h * s_q * s_k * d_v


def sdpa_backward_products(
    q_shape: tuple[int, ...], k_shape: tuple[int, ...], v_shape: tuple[int, ...]
) -> int:
    """torch's ``sdpa_backward_flop_count``: scores recomputed, grad scores, grad v, grad q,
    grad k (five products)."""
    b, h, s_q, d = q_shape
    s_k, d_v = k_shape[-2], v_shape[-1]
    return 2 * b * h * s_q * s_k * (3 * d + 2 * d_v)


def attention_core_flops(
    q_shape: tuple[int, ...],
    k_shape: tuple[int, ...],
    v_shape: tuple[int, ...],
    *,
    masked: bool,
    dropout: bool,
) -> Flops:
    """q: (b, h, s_q, d), k: (b, h_kv, s_k, d), v: (b, h_kv, s_k, d_v); the two batched
    products apart from scaling and softmax."""
    b, h, s_q, d = q_shape
    s_k = k_shape[-2]
    scores = b * h * s_q * s_k
    products = sdpa_products(q_shape, k_shape, v_shape)
    scaling = b * h * s_q * d + b * k_shape[1] * s_k * d
    pointwise = scores * (SOFTMAX_FLOPS_PER_ELEMENT + int(masked) + int(dropout))
    return Flops(products, scaling + pointwise)


def _as4d(shape: tuple[int, ...]) -> tuple[int, ...]:
    """SDPA accepts (..., s, d); fold leading dims into (b, h)."""
    if len(shape) == 4:
        return shape
    if len(shape) == 3:
        return (shape[0], 1, shape[1], shape[2])
    lead = 1
    for dim in shape[:-3]:
        lead *= dim
    return (lead, shape[-3], shape[-2], shape[-1])


def attention_backward_flops(
    q_shape: tuple[int, ...], k_shape: tuple[int, ...], v_shape: tuple[int, ...], *, dropout: bool
) -> Flops:
    """torch's five backward products apart from softmax backward and the q/k scaling."""
    b, h, s_q, d = q_shape
    s_k = k_shape[-2]
    products = sdpa_backward_products(q_shape, k_shape, v_shape)
    scaling = b * h * s_q * d + b * k_shape[1] * s_k * d
    softmax = b * h * s_q * s_k * (SOFTMAX_BACKWARD_FLOPS_PER_ELEMENT + int(dropout))
    return Flops(products, scaling + softmax)


def _sdpa_kernel(name: str, *, backward: bool) -> Any:
    """One formula for every fused SDPA kernel (CPU flash, the overrideable fused kernel, CUDA
    flash / memory-efficient / cuDNN), forward or backward, so a model's total does not change
    with the kernel torch picks (torch's own formulas for the CUDA kernels count the two
    products only). Argument positions come from the operator's schema: q, k, v come first
    (after grad_out in a backward), the mask is ``attn_mask`` or ``attn_bias``. None when this
    torch has no such kernel or its signature lacks ``dropout_p``."""
    try:
        schema = getattr(torch.ops.aten, name).default._schema
    except (AttributeError, RuntimeError):
        return None
    names = [argument.name for argument in schema.arguments]
    if "dropout_p" not in names:  # a signature this formula does not know: leave it to torch
        return None
    first = 1 if backward else 0
    dropout_at = names.index("dropout_p")
    mask_name = next((n for n in ("attn_bias", "attn_mask") if n in names), "")
    mask_at = names.index(mask_name) if mask_name else None

    def count(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> Flops:
        q, k, v = (_as4d(tuple(t.shape)) for t in args[first : first + 3])
        dropout = float(arg(args, kwargs, dropout_at, "dropout_p", 0.0)) > 0.0
        if backward:  # as torch counts flash/efficient backward; a mask adds no backward work
            return attention_backward_flops(q, k, v, dropout=dropout)
        masked = mask_at is not None and arg(args, kwargs, mask_at, mask_name, None) is not None
        return attention_core_flops(q, k, v, masked=masked, dropout=dropout)

    return count


for _name, _backward in (
    ("_scaled_dot_product_flash_attention_for_cpu", False),
    ("_scaled_dot_product_flash_attention_for_cpu_backward", True),
    ("_scaled_dot_product_fused_attention_overrideable", False),
    *(
        (f"_scaled_dot_product_{kernel}_attention{suffix}", suffix == "_backward")
        for kernel in ("flash", "efficient", "cudnn")
        for suffix in ("", "_backward")
    ),
):
    _formula = _sdpa_kernel(_name, backward=_backward)
    if _formula is not None:
        register_formula(_formula, _name, products="split")


def _mm(rows: int, inner: int, cols: int) -> int:
    return 2 * rows * inner * cols


# nine keyword-only inputs, over the 8-parameter cap on purpose: they are the formula's own
# variables (five sizes and the four flags that choose its stages), plain integers and bools
# as in torch's conv_flop_count; its two callers pass each by name
def multi_head_attention_flops(  # noqa: PLR0913 - the formula's own shape inputs
    *,
    batch: int,
    s_q: int,
    s_k: int,
    embed: int,
    heads: int,
    masked: bool,
    need_weights: bool,
    average_weights: bool,
    packed_bias: bool,
) -> Flops:
    """The stages F.multi_head_attention_forward runs for (batch, s, embed) inputs.

    In-projection (q: s_q rows, k and v: s_k rows; the packed self-attention projection is
    an ``mm`` + bias ``add``, counted 1/element, the separate projections ``addmm``), the
    attention core (explicit products + softmax when weights are returned, else SDPA), the
    mean over heads of the returned weights, and the out-projection.
    """
    d = embed // heads
    projections = 2 * _mm(batch * s_q, embed, embed) + 2 * _mm(batch * s_k, embed, embed)
    flops = Flops(projections, batch * s_q * 3 * embed if packed_bias else 0)
    q_shape, k_shape = (batch, heads, s_q, d), (batch, heads, s_k, d)
    scores = batch * heads * s_q * s_k
    if need_weights:  # q * scale, baddbmm/bmm, softmax, bmm
        other = batch * heads * s_q * d + scores * (SOFTMAX_FLOPS_PER_ELEMENT + int(masked))
        if average_weights:  # mean over heads: 1 per input element + 1 per output
            other += scores + batch * s_q * s_k
        return flops + Flops(sdpa_products(q_shape, k_shape, k_shape), other)
    return flops + attention_core_flops(q_shape, k_shape, k_shape, masked=masked, dropout=False)


def _batch_seq(t: Any) -> tuple[int, int]:
    return (t.shape[0], t.shape[1]) if t.dim() == 3 else (1, t.shape[0])


def _native_mha(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> Flops:
    """_native_multi_head_attention(q, k, v, embed_dim, num_head, qkv_w, qkv_b, proj_w,
    proj_b, mask, need_weights, average_attn_weights, mask_type)."""
    query, key = args[0], args[1]
    batch, s_q = _batch_seq(query)
    _, s_k = _batch_seq(key)
    return multi_head_attention_flops(
        batch=batch,
        s_q=s_q,
        s_k=s_k,
        embed=int(args[3]),
        heads=int(args[4]),
        masked=arg(args, kwargs, 9, "mask", None) is not None,
        need_weights=bool(arg(args, kwargs, 10, "need_weights", True)),
        average_weights=bool(arg(args, kwargs, 11, "average_attn_weights", True)),
        packed_bias=query is key and key is args[2],
    )


register_formula(_native_mha, "_native_multi_head_attention", products="split")


def encoder_layer_flops(
    batch: int, seq: int, embed: int, heads: int, hidden: int, masked: bool, affine: tuple[int, int]
) -> Flops:
    """One fused encoder layer: self-attention (need_weights=False), two residual adds, two
    layer norms (``affine``: how many of weight and bias each has), linear1 + activation +
    linear2."""
    tokens = batch * seq
    attention = multi_head_attention_flops(
        batch=batch,
        s_q=seq,
        s_k=seq,
        embed=embed,
        heads=heads,
        masked=masked,
        need_weights=False,
        average_weights=False,
        packed_bias=True,
    )
    norms = sum(norm_forward_flops(tokens * embed, stats=True, affine=a) for a in affine)
    feed_forward = Flops(_mm(tokens, embed, hidden) + _mm(tokens, hidden, embed), tokens * hidden)
    return attention + feed_forward + Flops(0, norms + 2 * tokens * embed)


_ENCODER_LAYERS: dict[tuple[Any, ...], Flops] = {}  # a model repeats one layer shape


def _encoder_layer(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> Flops:
    """_transformer_encoder_layer_fwd(src, embed_dim, num_heads, qkv_w, qkv_b, proj_w, proj_b,
    use_gelu, norm_first, eps, norm_w1, norm_b1, norm_w2, norm_b2, ffn_w1, ffn_b1, ffn_w2,
    ffn_b2, mask, mask_type). The count depends on a few sizes and flags, so it is computed
    once per distinct key (Flops is frozen: sharing it is safe)."""
    batch, seq = _batch_seq(args[0])
    w1, b1, w2, b2 = args[10:14]
    affine = ((w1 is not None) + (b1 is not None), (w2 is not None) + (b2 is not None))
    masked = arg(args, kwargs, 18, "mask", None) is not None
    key = (batch, seq, int(args[1]), int(args[2]), int(args[14].shape[0]), masked, affine)
    flops = _ENCODER_LAYERS.get(key)
    if flops is None:
        if len(_ENCODER_LAYERS) >= 1024:  # bounded: sizes that vary call after call
            _ENCODER_LAYERS.clear()
        flops = _ENCODER_LAYERS[key] = encoder_layer_flops(*key)
    return flops


register_formula(_encoder_layer, "_transformer_encoder_layer_fwd", products="split")


def _masked_scores(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    """_transform_bias_rescale_qkv(qkv, qkv_bias, num_heads): bias add + q scale per element."""
    return 2 * numel(args[0])


register_formula(_masked_scores, "_transform_bias_rescale_qkv")
