"""Reductions, scans and losses.

Convention: a reduction counts 1 FLOP per *input* element (n-1 adds/compares, rounded to n);
``mean`` adds 1 per output element (the divide); ``var``/``std`` count 4 per input element
(mean, subtract, square, accumulate) plus 1 per output (the divide; ``std`` one more for the
root); vector norms 2 per input element (|x|^p or square, accumulate) plus 1 per output (root);
``logsumexp`` 3 per input element (subtract max... exp, add) plus the max pass (1). Scans
(``cumsum``) count 1 per element. Losses count their elementwise steps plus the reduction.
"""

from __future__ import annotations

from typing import Any

from ._registry import convention, first_numel, numel, register_formula

convention(
    "reductions",
    "1 FLOP per input element (sum, prod, max, min, argmax, any, all, cumsum...); mean +1 "
    "per output; var/std 4 per input +1 per output (std +1 more); vector norm 2 per input +1 "
    "per output; logsumexp 4 per input; losses: their elementwise steps + reduction",
)


def _input_numel(args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    return numel(args[0]) if args else numel(kwargs.get("self"))


def per_input_element(flops_per_element: int, per_output: int = 0) -> Any:
    """``k`` FLOPs per element of the first argument, plus ``m`` per output element."""

    def count(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
        return flops_per_element * _input_numel(args, kwargs) + per_output * first_numel(out)

    count.__name__ = f"per_input_element_{flops_per_element}_{per_output}"
    return count


register_formula(
    per_input_element(1),
    "sum",
    "nansum",
    "prod",
    "amax",
    "amin",
    "max",
    "min",
    "aminmax",
    "argmax",
    "argmin",
    "any",
    "all",
    "count_nonzero",
    "cumsum",
    "cumsum_",
    "cumprod",
    "cumprod_",
    "cummax",
    "cummin",
    "logcumsumexp",
    "_cummax_helper",
    "_cummin_helper",
    "median",
    "nanmedian",
    "mode",
    "kthvalue",
)
register_formula(per_input_element(1, per_output=1), "mean", "nanmean")
register_formula(per_input_element(4, per_output=1), "var", "var_mean")
register_formula(per_input_element(4, per_output=2), "std", "std_mean")
register_formula(per_input_element(2, per_output=1), "linalg_vector_norm", "norm")
register_formula(per_input_element(4), "logsumexp")
# losses, forward: elementwise steps + the reduction over the input
register_formula(per_input_element(3), "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss")
register_formula(per_input_element(2), "mse_loss_backward")
register_formula(
    per_input_element(3), "smooth_l1_loss_backward", "huber_loss_backward", "soft_margin_loss"
)
register_formula(
    per_input_element(4),
    "binary_cross_entropy",
    "binary_cross_entropy_backward",
    "soft_margin_loss_backward",
)
register_formula(
    per_input_element(5), "binary_cross_entropy_with_logits", "multilabel_margin_loss_forward"
)


def _nll_loss(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    """nll_loss: one gathered value per target element, accumulated (weights: +1 each)."""
    target = numel(args[1]) if len(args) > 1 else numel(kwargs.get("target"))
    weighted = len(args) > 2 and args[2] is not None
    return target * (2 if weighted else 1)


register_formula(
    _nll_loss,
    "nll_loss_forward",
    "nll_loss2d_forward",
    "nll_loss_backward",
    "nll_loss2d_backward",
)


def _scatter_accumulate(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    """scatter_add/index_add(self, dim, index, src): one add per source element."""
    return numel(args[3]) if len(args) > 3 else numel(kwargs.get("src", kwargs.get("source")))


register_formula(
    _scatter_accumulate,
    "scatter_add",
    "scatter_add_",
    "index_add",
    "index_add_",
    "scatter_reduce",
    "scatter_reduce_",
    "index_reduce",
    "index_reduce_",
)
