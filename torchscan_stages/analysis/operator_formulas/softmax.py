"""Softmax and log-softmax, forward and backward.

Convention, per element of the input: softmax = 5 FLOPs (max, subtract, exp, sum, divide);
log-softmax = 5 (max, subtract, exp, sum, subtract log-sum). Backward: 4 per element
(softmax: g*y, row sum, subtract, multiply; log-softmax: exp, row sum, multiply, subtract).
"""

from __future__ import annotations

from typing import Any

from ._registry import convention, first_numel, register_formula

convention(
    "softmax",
    "softmax/log_softmax 5 FLOPs per element (max, subtract, exp, sum, divide or subtract "
    "log); their backward 4 per element",
)

SOFTMAX_FLOPS_PER_ELEMENT = 5
SOFTMAX_BACKWARD_FLOPS_PER_ELEMENT = 4


def _softmax(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    return SOFTMAX_FLOPS_PER_ELEMENT * first_numel(out)


def _softmax_backward(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    return SOFTMAX_BACKWARD_FLOPS_PER_ELEMENT * first_numel(out)


register_formula(_softmax, "_softmax", "_log_softmax", "_safe_softmax", "_masked_softmax")
register_formula(
    _softmax_backward,
    "_softmax_backward_data",
    "_log_softmax_backward_data",
    "_masked_softmax_backward",
)
