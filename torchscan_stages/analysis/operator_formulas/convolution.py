"""Convolutions, forward and backward: 2 FLOPs per multiply-add, the fused bias add not counted.

The forward kernels use torch's ``conv_flop_count`` on the shapes. The backward is counted
here, not with torch's ``convolution_backward`` formula: torch counts the weight gradient as
an ungrouped convolution (its shape transposition folds the groups away), so with ``groups``
g the weight gradient comes out g times too large -- a 64-channel depthwise 3x3 backward 65x
its forward instead of 2x. A grouped weight gradient is g independent convolutions of
``C_in/g`` by ``C_out/g`` channels, which costs exactly the forward's multiply-adds;
:func:`conv_backward_flops` counts it so, grouped, depthwise and transposed alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod
from typing import Any

from torch.utils.flop_counter import conv_flop_count

from ._registry import arg, convention, register_formula, shape

convention(
    "convolution",
    "2 FLOPs per multiply-add over every output position (padding included, as torch's "
    "conv_flop_count); bias add not counted; backward: grad_input as the transposed "
    "convolution, grad_weight the forward's multiply-adds divided among the groups (torch's "
    "FlopCounterMode counts it groups times too large)",
)


def conv_backward_flops(
    grad_out_shape: Sequence[int],
    x_shape: Sequence[int],
    w_shape: Sequence[int],
    *,
    transposed: bool = False,
    output_mask: Sequence[bool] = (True, True, False),
) -> int:
    """Backward FLOPs of a convolution from its shapes (``w_shape`` holds ``C_in/groups``).

    grad_input (``output_mask[0]``): the multiply-adds of the transposed (or, for a transposed
    convolution, the plain) convolution of grad_output with the weight -- torch's count.
    grad_weight (``output_mask[1]``): each weight element meets every position of its
    spatial map for every batch row: ``2 * N * prod(spatial) * numel(weight)``, where the
    spatial map is the output's for a convolution and the input's for a transposed one --
    the forward's count, whatever ``groups`` is. grad_bias: sums, not counted (as the bias
    add is not).
    """
    flops = 0
    if output_mask[0]:
        flops += conv_flop_count(
            list(grad_out_shape), list(w_shape), list(x_shape), transposed=not transposed
        )
    if output_mask[1]:
        spatial = (x_shape if transposed else grad_out_shape)[2:]
        flops += 2 * x_shape[0] * prod(spatial) * prod(w_shape)
    return int(flops)


def _convolution_backward(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    """convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
    transposed, output_padding, groups, output_mask)."""
    return conv_backward_flops(
        shape(args[0]),
        shape(args[1]),
        shape(args[2]),
        transposed=bool(arg(args, kwargs, 7, "transposed", False)),
        output_mask=arg(args, kwargs, 10, "output_mask", (True, True, True)),
    )


def _slow_conv2d_backward(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    """(grad_output, self, weight, kernel, stride, padding[, output_mask]): ungrouped."""
    return conv_backward_flops(
        shape(args[0]),
        shape(args[1]),
        shape(args[2]),
        output_mask=arg(args, kwargs, 6, "output_mask", (True, True, True)),
    )


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
    ...): torch's conv_flop_count arithmetic, ``2 * N * C_out * C_in/groups * prod(spatial) *
    prod(kernel)`` over the output's (transposed: the input's) spatial map, read straight off
    the tensors (the hottest formula of a CNN; a test checks it equals torch's)."""
    x, w = args[0].shape, args[1].shape
    spatial = (x if arg(args, kwargs, 6, "transposed", False) else out.shape)[2:]
    return 2 * x[0] * w[0] * w[1] * prod(spatial) * prod(w[2:])


register_formula(_convolution, "convolution", "_convolution", products="all")
register_formula(_convolution_backward, "convolution_backward", products="all")
register_formula(_slow_conv2d_backward, "_slow_conv2d_backward", products="all")
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
