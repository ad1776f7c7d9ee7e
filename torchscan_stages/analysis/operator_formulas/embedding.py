"""Embedding lookups and bags.

Convention: a plain lookup (``embedding``) is counted with 0 FLOPs (it gathers rows; the
operator is counted, not ignored, so its calls show in ``by_operator``). Its backward
accumulates each grad-output element into the table: 1 per element. ``embedding_bag`` adds
each gathered element into its bag (1 per gathered element, +1 with per-sample weights, +1
per output element for ``mean``); ``max`` mode compares (1 per gathered element).
"""

from __future__ import annotations

from typing import Any

from ._registry import arg, convention, numel, per_input_element, register_formula

convention(
    "embedding",
    "lookup 0 FLOPs (counted, gathers rows); backward 1 per grad-output element; "
    "embedding_bag 1 per gathered element (+1 weighted, +1 per output for mean)",
)


def _lookup(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    return 0


def _embedding_bag(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    weight, indices = args[0], args[1]
    gathered = numel(indices) * weight.shape[-1]
    mode = int(arg(args, kwargs, 4, "mode", 0))
    weighted = arg(args, kwargs, 6, "per_sample_weights", None) is not None
    bags = out[0].numel() if isinstance(out, (tuple, list)) else 0
    return gathered * (1 + int(weighted)) + (bags if mode == 1 else 0)


def _embedding_bag_backward(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    """(grad, indices, ...): every gathered element receives its bag's gradient."""
    grad, indices = args[0], args[1]
    return numel(indices) * (grad.shape[-1] if grad.dim() else 1)


register_formula(_lookup, "embedding")
# backward: 1 per element of grad_output (the first argument)
register_formula(per_input_element(1), "embedding_dense_backward", "embedding_backward")
register_formula(_embedding_bag, "_embedding_bag", "_embedding_bag_forward_only")
register_formula(
    _embedding_bag_backward,
    "_embedding_bag_backward",
    "_embedding_bag_dense_backward",
    "_embedding_bag_sparse_backward",
    "_embedding_bag_per_sample_weights_backward",
)
