"""Pointwise arithmetic, comparisons and activations, forward and backward.

Convention: one FLOP per output element for each elementwise function, whatever its cost in
hardware (``add``, ``mul``, ``exp``, ``tanh``, ``gelu``, a comparison alike); fused elementwise
ops count their arithmetic steps (``addcmul``/``addcdiv``/``lerp``: 3 per element; ``polar``:
cos, sin and two multiplies, 4 per element). An
``alpha``/``value`` scalar multiplier is not counted separately. Elementwise backward ops count
2 per element (evaluate the derivative, multiply by the incoming gradient);
``threshold_backward`` (relu's backward) counts 1 (a select-and-pass).
"""

from __future__ import annotations

from typing import Any

import torch

from ._registry import RawFormula, convention, first_numel, register_formula

convention(
    "pointwise",
    "1 FLOP per output element per elementwise function (arithmetic, comparison, "
    "activation, transcendental alike); addcmul/addcdiv/lerp 3; polar 4; elementwise "
    "backward 2 (threshold_backward 1)",
)


def per_output_element(flops_per_element: int) -> RawFormula:
    """``k`` FLOPs per element of the (first) output; in-place ops return ``self``."""

    def count(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
        return flops_per_element * first_numel(out)

    count.__name__ = f"per_output_element_{flops_per_element}"
    return count


def _with_inplace(names: list[str]) -> list[str]:
    expanded: list[str] = []
    for name in names:
        expanded.append(name)
        if hasattr(torch.ops.aten, name + "_"):
            expanded.append(name + "_")
    return expanded


UNARY = [
    "abs",
    "neg",
    "relu",
    "sigmoid",
    "tanh",
    "exp",
    "exp2",
    "expm1",
    "log",
    "log2",
    "log10",
    "log1p",
    "sqrt",
    "rsqrt",
    "reciprocal",
    "sin",
    "cos",
    "tan",
    "asin",
    "acos",
    "atan",
    "sinh",
    "cosh",
    "asinh",
    "acosh",
    "atanh",
    "erf",
    "erfc",
    "erfinv",
    "sign",
    "sgn",
    "floor",
    "ceil",
    "round",
    "trunc",
    "frac",
    "square",
    "gelu",
    "silu",
    "mish",
    "hardswish",
    "hardsigmoid",
    "hardtanh",
    "elu",
    "selu",
    "celu",
    "leaky_relu",
    "softplus",
    "softshrink",
    "hardshrink",
    "logit",
    "_prelu_kernel",
    "rrelu_with_noise",
    "threshold",
    "clamp",
    "clamp_min",
    "clamp_max",
    "clip",
    "nan_to_num",
    "lgamma",
    "digamma",
    "logical_not",
    "bitwise_not",
    "isnan",
    "isinf",
    "isfinite",
    "isposinf",
    "isneginf",
    "signbit",
    "relu6",
    "log_sigmoid_forward",
    "sinc",
    "deg2rad",
    "rad2deg",
    "positive",
    "conj_physical",
    "angle",
    "i0",
    "special_i0e",
    "special_i1",
    "special_i1e",
    "polygamma",
    "mvlgamma",
    "_conj_physical",
    "heaviside",
]
BINARY = [
    "add",
    "sub",
    "rsub",
    "mul",
    "div",
    "true_divide",
    "floor_divide",
    "pow",
    "float_power",
    "maximum",
    "minimum",
    "fmax",
    "fmin",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "logical_and",
    "logical_or",
    "logical_xor",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "bitwise_left_shift",
    "bitwise_right_shift",
    "atan2",
    "hypot",
    "copysign",
    "xlogy",
    "fmod",
    "remainder",
    "nextafter",
    "ldexp",
    "logaddexp",
    "logaddexp2",
    "special_xlog1py",
    "glu",
]
TERNARY = ["addcmul", "addcdiv", "lerp"]
BACKWARD_2 = [
    "gelu_backward",
    "silu_backward",
    "mish_backward",
    "sigmoid_backward",
    "tanh_backward",
    "hardswish_backward",
    "hardsigmoid_backward",
    "hardtanh_backward",
    "elu_backward",
    "leaky_relu_backward",
    "softplus_backward",
    "softshrink_backward",
    "hardshrink_backward",
    "logit_backward",
    "log_sigmoid_backward",
    "rrelu_with_noise_backward",
    "_prelu_kernel_backward",
    "glu_backward",
]

register_formula(per_output_element(1), *_with_inplace(UNARY + BINARY))
register_formula(per_output_element(3), *_with_inplace(TERNARY))
register_formula(per_output_element(2), *BACKWARD_2)
register_formula(per_output_element(1), "threshold_backward")
# polar(abs, angle) = abs * cos(angle) + i * abs * sin(angle): cos, sin and two multiplies
# per complex output element (rotary tables built as complex numbers, e.g. Llama 4)
register_formula(per_output_element(4), "polar")


def _dropout(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    """native_dropout: one scale-multiply per element (mask generation is RNG, not counted)."""
    return first_numel(out)


register_formula(_dropout, "native_dropout", "native_dropout_backward")
