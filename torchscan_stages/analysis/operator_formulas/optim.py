"""Optimizer kernels: ``_foreach_*`` list ops and the fused Adam/AdamW/SGD/Adagrad kernels.

Convention: a ``_foreach_<op>`` counts what ``<op>`` counts, summed over its tensor list (1 per
element; addcmul/addcdiv/lerp 3; norm 2 per element + 1 per tensor). Fused optimizers count the
same elementwise steps as their single-tensor implementations: Adam/AdamW 13 per parameter
element (moment lerp 3, second moment mul + addcmul 4, sqrt, bias-correction divide, eps add,
addcdiv 3), +1 for weight decay, +1 for amsgrad's max; SGD 1 (+1 weight decay, +2 momentum
after its first step, +1 Nesterov); Adagrad 6 (+1 weight decay).
"""

from __future__ import annotations

from typing import Any

import torch

from ._registry import convention, numel, per_input_element, register_formula

convention(
    "optimizer",
    "_foreach_<op>: the per-element cost of <op> over the whole list; fused Adam/AdamW 13 "
    "per parameter element (+1 weight decay, +1 amsgrad), SGD 1 (+1 weight decay, +2 "
    "momentum, +1 nesterov), Adagrad 6 (+1 weight decay)",
)


def _with_inplace(names: list[str]) -> list[str]:
    result = []
    for name in names:
        for candidate in (f"_foreach_{name}", f"_foreach_{name}_"):
            if hasattr(torch.ops.aten, candidate):
                result.append(candidate)
    return result


FOREACH_1 = [
    "add",
    "sub",
    "mul",
    "div",
    "sqrt",
    "rsqrt",
    "neg",
    "abs",
    "exp",
    "expm1",
    "log",
    "log10",
    "log1p",
    "log2",
    "reciprocal",
    "maximum",
    "minimum",
    "clamp_min",
    "clamp_max",
    "sign",
    "pow",
    "sigmoid",
    "tanh",
    "sin",
    "cos",
    "tan",
    "asin",
    "acos",
    "atan",
    "sinh",
    "cosh",
    "erf",
    "erfc",
    "lgamma",
    "floor",
    "ceil",
    "round",
    "trunc",
    "frac",
]
register_formula(per_input_element(1), *_with_inplace(FOREACH_1))
register_formula(per_input_element(3), *_with_inplace(["addcmul", "addcdiv", "lerp"]))


def _foreach_norm(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    tensors = args[0]
    return 2 * numel(tensors) + len(tensors)


register_formula(_foreach_norm, "_foreach_norm")


def _fused_adam(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    per_element = 13
    per_element += int(float(kwargs.get("weight_decay", 0.0)) != 0.0)
    per_element += int(bool(kwargs.get("amsgrad", False)))
    return per_element * numel(args[0])


def _fused_sgd(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    per_element = 1 + int(float(kwargs.get("weight_decay", 0.0)) != 0.0)
    if float(kwargs.get("momentum", 0.0)) != 0.0 and not kwargs.get("is_first_step", False):
        per_element += 2 + int(bool(kwargs.get("nesterov", False)))
    return per_element * numel(args[0])


def _fused_adagrad(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    per_element = 6 + int(float(kwargs.get("weight_decay", 0.0)) != 0.0)
    return per_element * numel(args[0])


register_formula(_fused_adam, "_fused_adam_", "_fused_adamw_", "_fused_adam", "_fused_adamw")
register_formula(_fused_sgd, "_fused_sgd_", "_fused_sgd")
register_formula(_fused_adagrad, "_fused_adagrad_", "_fused_adagrad")
