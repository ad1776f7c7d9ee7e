"""Triangular solves: the linear-attention kernels' (gated delta rule) chunk inversions.

Solving ``A X = B`` for a triangular ``n x n`` ``A`` by substitution takes, per column of
``B``, ``i`` multiply-adds for row ``i`` plus one divide: ``n (n - 1)`` multiplies and
subtractions and ``n`` divides, ``n ** 2`` FLOPs (``n (n - 1)`` with a unit diagonal, which
divides by nothing). Every batch and every column of the solution costs that, so a solve
counts ``numel(solution) * n`` (``* (n - 1)`` unitriangular), whichever side ``A`` is on.
Not a tensor product in FlopCounterMode's sense (it counts none), so no products share.
"""

from __future__ import annotations

from typing import Any

from ._registry import arg, convention, first_numel, register_formula, shape

convention(
    "linalg",
    "triangular solves (linalg_solve_triangular, triangular_solve): n^2 per column of the "
    "solution (n(n-1) with a unit diagonal), n the triangle's size; no products share",
)


def _per_column(n: int, unitriangular: bool) -> int:
    return n * (n - 1) if unitriangular else n * n


def _solve_triangular(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    """linalg_solve_triangular(A, B, *, upper, left=True, unitriangular=False): X = A^-1 B."""
    a_shape = shape(args[0]) if args else shape(kwargs.get("self"))
    if len(a_shape) < 2:
        return 0
    n = a_shape[-1]
    unit = bool(kwargs.get("unitriangular", False))
    return first_numel(out) * _per_column(n, unit) // n if n else 0


def _triangular_solve(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    """triangular_solve(B, A, upper, transpose, unitriangular) -> (solution, A's clone)."""
    a_shape = shape(arg(args, kwargs, 1, "A"))
    if len(a_shape) < 2:
        return 0
    n = a_shape[-1]
    unit = bool(arg(args, kwargs, 4, "unitriangular", False))
    return first_numel(out) * _per_column(n, unit) // n if n else 0


register_formula(_solve_triangular, "linalg_solve_triangular")
register_formula(_triangular_solve, "triangular_solve")
