"""Reductions, scans and losses.

Convention: a reduction counts 1 FLOP per *input* element (n-1 adds/compares, rounded to n);
``mean`` adds 1 per output element (the divide); ``var``/``std`` count 4 per input element
(mean, subtract, square, accumulate) plus 1 per output (the divide; ``std`` one more for the
root); vector norms 2 per input element (|x|^p or square, accumulate) plus 1 per output (root);
``logsumexp`` 3 per input element (subtract max... exp, add) plus the max pass (1). Scans
(``cumsum``) count 1 per element. Losses count their elementwise steps plus the reduction.
Accumulating writes (``scatter_add``, ``index_add``, ``index_put(accumulate=True)``, a
``scatter`` with ``reduce``) count 1 per element accumulated; the same writes without
accumulation copy (0, but counted, so their calls show).
"""

from __future__ import annotations

from math import prod
from typing import Any

import torch

from ._registry import (
    arg,
    convention,
    numel,
    per_input_element,
    register_formula,
    shape,
)

convention(
    "reductions",
    "1 FLOP per input element (sum, prod, max, min, argmax, any, all, cumsum...); mean +1 "
    "per output; var/std 4 per input +1 per output (std +1 more); vector norm 2 per input +1 "
    "per output; logsumexp 4 per input; losses: their elementwise steps + reduction",
)


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


def _indexed_numel(self_shape: tuple[int, ...], indices: Any) -> int:
    """Elements an advanced-indexing assignment ``self[indices] = values`` touches.

    Integer index tensors broadcast together and consume one dimension each; a boolean mask
    consumes its dimensions and selects its nonzero count (read from the mask); ``None``
    keeps a whole dimension, as do the trailing dimensions no index reaches.
    """
    index_shapes: list[tuple[int, ...]] = []
    rest = 1
    position = 0
    for index in indices:
        if index is None:
            rest *= self_shape[position]
            position += 1
        elif index.dtype in (torch.bool, torch.uint8):
            index_shapes.append((int(index.count_nonzero()),))
            position += index.dim()
        else:
            index_shapes.append(tuple(index.shape))
            position += 1
    for size in self_shape[position:]:
        rest *= size
    if not index_shapes:
        return rest
    return prod(torch.broadcast_shapes(*index_shapes)) * rest


def _index_put(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    """index_put(self, indices, values, accumulate=False) and its in-place/unsafe forms: one
    add per indexed element when accumulating (an indexing backward does this), else 0 (a
    plain assignment copies)."""
    if not arg(args, kwargs, 3, "accumulate", False):
        return 0
    return _indexed_numel(shape(args[0]), arg(args, kwargs, 1, "indices", ()))


def _scatter(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    """scatter(self, dim, index, src|value[, reduce]): one add/multiply per index element when
    a ``reduce`` is given, else 0 (a plain scatter copies)."""
    if arg(args, kwargs, 4, "reduce", None) is None:
        return 0
    return numel(arg(args, kwargs, 2, "index", None))


register_formula(_index_put, "index_put", "index_put_", "_index_put_impl_", "_unsafe_index_put")
register_formula(_scatter, "scatter", "scatter_")
