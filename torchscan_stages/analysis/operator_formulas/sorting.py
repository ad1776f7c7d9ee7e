"""Sorting, top-k selection and histograms: comparisons and bin increments, no products.

A comparison counts 1 FLOP, as in the pointwise and reduction families. Sorting counts
``n * ceil(log2 n)`` comparisons per sorted slice of length n -- the comparison-sort bound,
whatever algorithm the kernel picks (radix sorts compare less, so this is the convention, not
a measurement). Top-k selection counts 1 comparison per input element, like ``max`` and
``kthvalue`` (for k = 1 it is ``max``); ordering the k winners is not counted. Histograms
(``histc``, ``bincount``) count 1 per input element: the increment of its bin (a weighted
increment is still one add); locating the bin and the min/max scan of an automatic range are
not counted. These are small beside the products they route (a MoE router's topk and sort
are well under 1% of its experts' products). Set membership (``isin``, the end-of-sequence
check of ``generate``) counts 1 comparison per (element, test element) pair, ``n * m``: the
brute-force definition, whatever path the kernel takes (for a large test set it sorts and
compares fewer), as sorting counts its bound.
"""

from __future__ import annotations

from typing import Any

import torch

from ._registry import arg, convention, register_formula, shape
from .reductions import per_input_element

convention(
    "sorting",
    "sort/argsort/msort n*ceil(log2 n) comparisons per slice of length n; topk 1 per input "
    "element (selection, as max/kthvalue); histc/bincount 1 per input element (bin increment); "
    "isin n*m comparisons (every element against every test element)",
)


def sort_flops(x_shape: tuple[int, ...], dim: int) -> int:
    """``n * ceil(log2 n)`` comparisons for each of the ``numel / n`` slices along ``dim``."""
    if not x_shape:  # a 0-d tensor is one element: nothing to compare
        return 0
    n = x_shape[dim]
    if n <= 1:
        return 0
    slices = 1
    for size in x_shape:
        slices *= size
    slices //= n
    return slices * n * (n - 1).bit_length()  # (n-1).bit_length() == ceil(log2 n) for n >= 2


def _sort(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    """sort/argsort(self, dim=-1, descending=False) and the ``stable`` overloads (dim keyword)."""
    return sort_flops(shape(args[0]), int(arg(args, kwargs, 1, "dim", -1)))


def _msort(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    """msort(self): sort along dim 0."""
    return sort_flops(shape(args[0]), 0)


register_formula(_sort, "sort", "argsort")
register_formula(_msort, "msort")
# topk(self, k, ...), histc(self, ...), bincount(self, ...): 1 per element of self
register_formula(per_input_element(1), "topk", "histc", "bincount")


def _isin(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    """isin(elements, test_elements): every element compared with every test element.

    A Python scalar on either side (the ``Tensor_Scalar`` / ``Scalar_Tensor`` overloads) is
    one element; ``invert`` flips the answer at no further comparison.
    """
    elements = arg(args, kwargs, 0, "elements", arg(args, kwargs, 0, "element"))
    tests = arg(args, kwargs, 1, "test_elements", arg(args, kwargs, 1, "test_element"))
    return _members(elements) * _members(tests)


def _members(value: Any) -> int:
    return value.numel() if isinstance(value, torch.Tensor) else 1


register_formula(_isin, "isin")
