"""Pooling and interpolation, forward and backward.

Convention: max and average pooling count one FLOP per kernel element per output element
(max: k-1 compares; average: k-1 adds and one divide); adaptive pooling counts the exact size
of each output's window. Backward: max pooling 1 per grad-output element (scatter-add),
average pooling the forward count. Linear interpolation counts 2^d multiplies and 2^d - 1
adds per output element (linear 3, bilinear 7, trilinear 15; bicubic 31); its backward the
same per grad-output element. Nearest-neighbour resampling is data movement (ignored).
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod
from typing import Any

from ._registry import arg, convention, first_numel, numel, per_input_element, register_formula

convention(
    "pooling",
    "max/avg pool: kernel elements per output element (adaptive: exact window sizes); "
    "max-pool backward 1 per grad-output element, avg-pool backward as forward; linear "
    "interpolation 2^d mul + 2^d-1 add per output element (bicubic 31)",
)


def _kernel_elements(kernel: Any, spatial: int) -> int:
    if isinstance(kernel, int):
        return kernel**spatial
    sizes = list(kernel)
    if len(sizes) == 1:
        return int(sizes[0]) ** spatial
    return prod(int(size) for size in sizes)


def _windowed(spatial: int, kernel_index: int) -> Any:
    """k per output element; the output is the op's result (``out``)."""

    def count(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
        kernel = arg(args, kwargs, kernel_index, "kernel_size", 1)
        return _kernel_elements(kernel, spatial) * first_numel(out)

    return count


def _windowed_backward(spatial: int) -> Any:
    """avg_pool backward: k per grad-output element (args: grad_output, self, kernel_size)."""

    def count(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
        kernel = arg(args, kwargs, 2, "kernel_size", 1)
        return _kernel_elements(kernel, spatial) * numel(args[0])

    return count


for _d in (1, 2, 3):
    register_formula(
        _windowed(_d, 1),
        f"max_pool{_d}d_with_indices",
        f"avg_pool{_d}d",
        *([f"max_pool{_d}d"] if _d != 2 else ["max_pool2d", "mkldnn_max_pool2d"]),
        *(["mkldnn_max_pool3d"] if _d == 3 else []),
        *(["quantized_max_pool1d"] if _d == 1 else []),
    )
    if _d != 1:  # avg_pool1d runs as avg_pool2d
        register_formula(_windowed_backward(_d), f"avg_pool{_d}d_backward")


register_formula(
    per_input_element(1),  # 1 per element of grad_output
    "max_pool2d_with_indices_backward",
    "max_pool3d_with_indices_backward",
    "adaptive_max_pool2d_backward",
    "adaptive_max_pool3d_backward",
    "mkldnn_max_pool2d_backward",
    "mkldnn_max_pool3d_backward",
    "max_unpool2d",
    "max_unpool3d",
)


def adaptive_window_elements(in_sizes: Sequence[int], out_sizes: Sequence[int]) -> int:
    """Sum over outputs of the window size, for PyTorch's adaptive windows (start=floor(i*in/out),
    end=ceil((i+1)*in/out)); separable, so it is a product over dimensions."""
    total = 1
    for size_in, size_out in zip(in_sizes, out_sizes, strict=True):
        per_dim = 0
        for i in range(size_out):
            start = (i * size_in) // size_out
            end = -((-(i + 1) * size_in) // size_out)
            per_dim += end - start
        total *= per_dim
    return total


def _adaptive(spatial: int, backward: bool) -> Any:
    def count(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
        if backward:  # (grad_output, self, ...): output sizes from the grad
            x, y_shape = args[1], tuple(args[0].shape)
        else:
            x = args[0]
            y = out[0] if isinstance(out, (tuple, list)) else out
            y_shape = tuple(y.shape)
        lead = prod(x.shape[:-spatial])
        return lead * adaptive_window_elements(x.shape[-spatial:], y_shape[-spatial:])

    return count


for _d in (1, 2, 3):
    register_formula(
        _adaptive(_d, False),
        f"adaptive_max_pool{_d}d",
        *(["adaptive_avg_pool1d"] if _d == 1 else [f"_adaptive_avg_pool{_d}d"]),
    )
register_formula(_adaptive(2, True), "_adaptive_avg_pool2d_backward")
register_formula(_adaptive(3, True), "_adaptive_avg_pool3d_backward")


def _interpolation(per_element: int, backward: bool) -> Any:
    def count(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
        return per_element * (numel(args[0]) if backward else first_numel(out))

    return count


INTERPOLATION_FLOPS = {  # FLOPs per output element of each interpolation operator
    "upsample_linear1d": 3,
    "upsample_bilinear2d": 7,
    "upsample_trilinear3d": 15,
    "upsample_bicubic2d": 31,
}
for _name, _cost in INTERPOLATION_FLOPS.items():
    register_formula(_interpolation(_cost, False), _name)
    register_formula(_interpolation(_cost, True), f"{_name}_backward")
register_formula(_interpolation(7, False), "grid_sampler_2d")
register_formula(_interpolation(15, False), "grid_sampler_3d")
