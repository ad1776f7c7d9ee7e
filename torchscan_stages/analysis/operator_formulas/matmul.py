"""Matrix products and convolutions, all in torch's convention.

torch.utils.flop_counter's formulas for _scaled_mm, convolution_backward and the SDPA kernels
are reused unchanged (2 FLOPs per multiply-add; the bias add of addmm/convolution is not
counted). mm, addmm, bmm, baddbmm, convolution and _convolution are counted here with torch's
arithmetic, read straight off the tensors: torch's formulas map every argument to shapes
through pytree (and addmm/baddbmm call the wrapped mm/bmm formulas again), which cost more
than the rest of the counting together (tests check both give the same numbers). This file
also adds the remaining products with the same convention: vector products, addbmm, outer
products, int8 matmul, oneDNN linear and the backend convolutions that can reach the
dispatcher. Every count here is tensor products.
"""

from __future__ import annotations

from typing import Any

from torch.utils.flop_counter import conv_flop_count

from ._registry import Flops, arg, convention, first_numel, numel, register_formula, shape

convention(
    "matmul",
    "2 FLOPs per multiply-add (torch.utils.flop_counter's mm/bmm/conv/SDPA formulas reused); "
    "bias adds fused into addmm/convolution not counted, as in torch",
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


def _conv(weight_index: int, transposed: bool) -> Any:
    """Backend convolutions ``(self, weight, ...)``: torch's conv_flop_count on x, w, out."""

    def count(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
        y = out[0] if isinstance(out, (tuple, list)) else out
        return int(
            conv_flop_count(
                list(shape(args[0])),
                list(shape(args[weight_index])),
                list(shape(y)),
                transposed=transposed,
            )
        )

    return count


def _convolution(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    """convolution/_convolution(input, weight, bias, stride, padding, dilation, transposed,
    ...): torch's conv_flop_count on the shapes, read straight off the tensors."""
    transposed = bool(arg(args, kwargs, 6, "transposed", False))
    return int(
        conv_flop_count(
            list(args[0].shape), list(args[1].shape), list(out.shape), transposed=transposed
        )
    )


register_formula(_convolution, "convolution", "_convolution", products="all")
register_formula(
    _conv(1, False),
    "mkldnn_convolution",
    "_conv_depthwise2d",
    "conv_depthwise3d",
    "slow_conv3d_forward",
    "slow_conv_dilated2d",
    "slow_conv_dilated3d",
    "_nnpack_spatial_convolution",
    "thnn_conv2d",
    "cudnn_convolution_relu",
    "cudnn_convolution_add_relu",
    "miopen_convolution",
    "miopen_depthwise_convolution",
    products="all",
)
register_formula(
    _conv(1, True),
    "slow_conv_transpose2d",
    "slow_conv_transpose3d",
    "cudnn_convolution_transpose",
    "miopen_convolution_transpose",
    products="all",
)


def _slow_conv2d_backward(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    """(grad_output, self, weight, kernel, stride, padding[, output_mask]): as torch counts
    convolution_backward: grad_input as a transposed conv, grad_weight as a conv."""
    grad_out, x, w = list(shape(args[0])), list(shape(args[1])), list(shape(args[2]))
    mask = arg(args, kwargs, 6, "output_mask", [True, True, True])
    flops = 0
    if mask[0]:
        flops += conv_flop_count(grad_out, w, x, transposed=True)
    if mask[1]:

        def t(dims: list[int]) -> list[int]:
            return [dims[1], dims[0], *dims[2:]]

        flops += conv_flop_count(t(x), t(grad_out), t(w), transposed=False)
    return int(flops)


register_formula(_slow_conv2d_backward, "_slow_conv2d_backward", products="all")
