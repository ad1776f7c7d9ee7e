"""Matrix products, in torch's convention (2 FLOPs per multiply-add, bias adds not counted).

mm, addmm, bmm and baddbmm are counted here with torch's arithmetic, read straight off the
tensors: torch's formulas map every argument to shapes through pytree (and addmm/baddbmm call
the wrapped mm/bmm formulas again), which cost more than the rest of the counting together
(tests check both give the same numbers). torch's formula for ``_scaled_mm`` is reused
unchanged. This file adds the remaining products with the same convention: vector products,
addbmm, outer products, int8 matmul, oneDNN linear and the grouped (MoE) products. Every
count here is tensor products; convolutions live in ``convolution.py`` and attention kernels
in ``attention.py`` (which replaces torch's SDPA formulas).
"""

from __future__ import annotations

from typing import Any

from ._registry import Flops, convention, first_numel, numel, register_formula, shape

convention(
    "matmul",
    "2 FLOPs per multiply-add (torch.utils.flop_counter's mm/bmm arithmetic); bias adds fused "
    "into addmm not counted, as in torch; grouped mm: rows inside its offsets only",
)


def _mm(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    """mm(a, b): 2 * m * k * n."""
    m, k = args[0].shape
    return 2 * m * k * args[1].shape[1]


def _addmm(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    """addmm(self, a, b): the product only, as torch counts it."""
    m, k = args[1].shape
    return 2 * m * k * args[2].shape[1]


def _bmm(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    """bmm(a, b): 2 * batch * m * k * n."""
    b, m, k = args[0].shape
    return 2 * b * m * k * args[1].shape[2]


def _baddbmm(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    b, m, k = args[1].shape
    return 2 * b * m * k * args[2].shape[2]


def _mv(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    """mv(mat, vec): 2 * rows * cols."""
    return 2 * numel(args[0])


def _addmv(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    return 2 * numel(args[1])


def _dot(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    return 2 * numel(args[0])


def _addbmm(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    b, m, k = shape(args[1])
    return 2 * b * m * k * shape(args[2])[-1]


def _outer(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    """addr(self, v1, v2): one multiply per output element (the add of self uncounted)."""
    return first_numel(out)


def _int_mm(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    m, k = shape(args[0])
    return 2 * m * k * shape(args[1])[-1]


def _linear(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    """linear(input, weight, bias): 2 * rows * in * out (bias not counted, like addmm)."""
    weight = args[1]
    rows = numel(args[0]) // weight.shape[-1]
    return 2 * rows * weight.shape[0] * weight.shape[1]


def _addmm_activation(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> Flops:
    """addmm + relu/gelu fused: the product plus 1 per output element (the activation)."""
    m, k = shape(args[1])
    return Flops(2 * m * k * shape(args[2])[-1], first_numel(out))


register_formula(_mm, "mm", products="all")
register_formula(_addmm, "addmm", products="all")
register_formula(_bmm, "bmm", products="all")
register_formula(_baddbmm, "baddbmm", products="all")
register_formula(_mv, "mv", products="all")
register_formula(_addmv, "addmv", "addmv_", products="all")
register_formula(_dot, "dot", "vdot", "inner", products="all")
register_formula(_addbmm, "addbmm", "addbmm_", products="all")
register_formula(_outer, "addr", "addr_", "outer", "ger", products="all")
register_formula(_int_mm, "_int_mm", products="all")
register_formula(_linear, "mkldnn_linear", "linear", products="all")
register_formula(_addmm_activation, "_addmm_activation", products="split")


def _offsets_end(offs: Any, size: int) -> int:
    """How much of the split dimension the groups cover: ``offs[-1]`` (the kernel leaves the
    rest untouched), capped at ``size``. Reading it syncs a CUDA stream; counting never times."""
    if offs is None or offs.numel() == 0:
        return size
    if offs.is_meta or type(offs).__name__ == "FakeTensor":
        raise ValueError(
            f"the groups' offsets are routing data (offs[-1] rows of at most {size}), which "
            "meta/fake tensors do not hold; count the experts on real tensors, or pass a "
            "custom_mapping formula that assumes the routing"
        )
    return min(int(offs[-1]), size)


def grouped_mm_flops(a_shape: Any, b_shape: Any, used: int | None = None) -> int:
    """``_grouped_mm`` from its operand shapes; ``used`` is ``offs[-1]`` (None: no offsets).

    2d x 3d (MoE experts): ``(T, K) x (G, K, N)``, rows split by offs -> 2 * used * K * N.
    3d x 2d: ``(G, M, K) x (K, T)``, columns split -> 2 * M * K * used.
    2d x 2d (a weight gradient): ``(M, T) x (T, N)``, the contraction split -> 2 * M * used * N.
    3d x 3d: ``(G, M, K) x (G, K, N)`` -> 2 * G * M * K * N.
    """
    if len(a_shape) == 3 and len(b_shape) == 3:
        g, m, k = a_shape
        return 2 * g * m * k * b_shape[2]
    if len(a_shape) == 2 and len(b_shape) == 3:
        t, k = a_shape
        return 2 * (t if used is None else used) * k * b_shape[2]
    if len(a_shape) == 3 and len(b_shape) == 2:
        _, m, k = a_shape
        return 2 * m * k * (b_shape[1] if used is None else used)
    m, t = a_shape
    return 2 * m * (t if used is None else used) * b_shape[1]


def _grouped_mm(offs_index: int) -> Any:
    """``_grouped_mm(self, mat2, offs, ...)`` / ``_scaled_grouped_mm(self, mat2, scale_a,
    scale_b, offs, ...)``: the products of the rows inside the offsets (the scales of the
    scaled variant are not counted, as torch does not count them for ``_scaled_mm``)."""

    def count(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
        a, b = shape(args[0]), shape(args[1])
        offs = args[offs_index] if len(args) > offs_index else kwargs.get("offs")
        if offs is None:
            return grouped_mm_flops(a, b)
        split = b[1] if len(a) == 3 else a[0] if len(b) == 3 else a[1]
        return grouped_mm_flops(a, b, _offsets_end(offs, split))

    return count


register_formula(_grouped_mm(2), "_grouped_mm", products="all")
register_formula(_grouped_mm(4), "_scaled_grouped_mm", products="all")
