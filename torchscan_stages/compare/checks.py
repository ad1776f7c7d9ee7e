"""The owner's output check: how its answer is read, and the allclose check the pipeline uses.

A check decides whether a candidate's outputs are acceptable; nothing here invents a
tolerance. Any answer that is not clearly a pass is a failed check with the reason recorded.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from ..report import CheckResult

Check = Callable[[Any, Any], Any]


def run_check(check: Check, base_out: Any, cand_out: Any) -> CheckResult:
    """The owner's check: a bool, a mapping or an object with ``passed`` (+ detail, tolerance).

    An exception or an answer of another type is a failed check with the error recorded.
    """
    given = (_copied(base_out), _copied(cand_out))  # the check cannot touch the real ones
    try:
        answer = check(*given)
    except Exception as error:  # the owner's code: any failure is a failed check
        return CheckResult(performed=True, passed=False, error=f"{type(error).__name__}: {error}")
    if not (_unchanged(given[0], base_out) and _unchanged(given[1], cand_out)):
        return CheckResult(
            performed=True,
            passed=False,
            error="the check changed the outputs it was given (in place), so its answer is not "
            "about the outputs the workloads produced; compare without modifying them",
        )
    answer = _plain_bool(answer)
    if isinstance(answer, bool):
        return CheckResult(performed=True, passed=answer)
    fields: Mapping[str, Any] | None = None
    if isinstance(answer, Mapping):
        fields = answer
    elif hasattr(answer, "passed"):
        fields = {name: getattr(answer, name, None) for name in ("passed", "detail", "tolerance")}
    passed = _plain_bool(fields.get("passed")) if fields is not None else None
    if fields is not None and isinstance(passed, bool):
        tolerance = fields.get("tolerance")
        return CheckResult(
            performed=True,
            passed=passed,
            detail=None if fields.get("detail") is None else str(fields["detail"]),
            tolerance=tolerance if _is_json_scalar_tree(tolerance) else repr(tolerance),
        )
    return CheckResult(
        performed=True,
        passed=False,
        error=(
            f"check returned {type(answer).__name__}; expected a bool, a mapping with a bool "
            "'passed' (and optional 'detail', 'tolerance'), or an object with those attributes"
        ),
    )


def _tensors(value: Any) -> list[Any]:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in _tensors(item)]
    if isinstance(value, Mapping):
        return [t for key in value for t in _tensors(value[key])]
    return []


def _copied(value: Any) -> Any:
    """``value`` with every tensor cloned (containers rebuilt): what the check may modify."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a named tuple
        return type(value)(*(_copied(item) for item in value))
    if isinstance(value, (tuple, list)):
        return type(value)(_copied(item) for item in value)
    if isinstance(value, dict):
        return {key: _copied(item) for key, item in value.items()}
    return value


def _unchanged(copy: Any, original: Any) -> bool:
    """Whether the check left its copies equal to the outputs (bit for bit, NaN == NaN)."""
    import torch

    pairs = list(zip(_tensors(copy), _tensors(original), strict=False))
    if len(pairs) != len(_tensors(original)):
        return False
    for a, b in pairs:
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        try:
            torch.testing.assert_close(a, b.detach(), rtol=0, atol=0, equal_nan=True)
        except AssertionError:
            return False
    return True


def _plain_bool(answer: Any) -> Any:
    """A one-element boolean tensor or a numpy bool (e.g. ``(a == b).all()``) as a bool."""
    dtype = getattr(answer, "dtype", None)
    if dtype is None or getattr(answer, "ndim", None) != 0:
        return answer
    if str(dtype) in ("torch.bool", "bool"):
        return bool(answer.item())
    return answer


def _is_json_scalar_tree(value: Any) -> bool:
    if isinstance(value, float) and not math.isfinite(value):
        return False  # JSON has no inf/nan: kept as its repr instead
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_is_json_scalar_tree(item) for item in value)
    if isinstance(value, Mapping):
        return all(isinstance(k, str) and _is_json_scalar_tree(v) for k, v in value.items())
    return False


def allclose_check(rtol: float, atol: float) -> Any:
    """The owner's output check: every output tensor allclose to the baseline's."""
    import torch

    def tensors(value: Any) -> list[Any]:
        if isinstance(value, torch.Tensor):
            return [value]
        if isinstance(value, (tuple, list)):
            return [t for item in value for t in tensors(item)]
        if isinstance(value, dict):
            return [t for key in sorted(value) for t in tensors(value[key])]
        return []

    def check(base_out: Any, cand_out: Any) -> dict[str, Any]:
        base, cand = tensors(base_out), tensors(cand_out)
        tolerance = {"rtol": rtol, "atol": atol}
        if not base or len(base) != len(cand):
            return {
                "passed": False,
                "tolerance": tolerance,
                "detail": f"output structure differs: {len(base)} vs {len(cand)} tensors",
            }
        worst = 0.0
        passed = True
        for b, c in zip(base, cand, strict=True):
            if b.shape != c.shape:
                return {
                    "passed": False,
                    "tolerance": tolerance,
                    "detail": f"shape {tuple(c.shape)} != baseline {tuple(b.shape)}",
                }
            b32, c32 = b.detach().float().cpu(), c.detach().float().cpu()
            worst = max(worst, float((c32 - b32).abs().max()) if b32.numel() else 0.0)
            passed = passed and bool(torch.allclose(c32, b32, rtol=rtol, atol=atol))
        return {
            "passed": passed,
            "tolerance": tolerance,
            "detail": f"max |candidate - baseline| = {worst:.3g}; "
            f"torch.allclose(rtol={rtol}, atol={atol})",
        }

    return check
