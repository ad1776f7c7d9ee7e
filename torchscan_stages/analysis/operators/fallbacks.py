"""Package-side kernels for operators whose meta/fake kernel refuses what the real one runs.

A pass over ``meta`` or fake tensors (``measure_flops`` and ``crawl_module`` on a
``meta``-built model, ``predict_peak_memory``'s fake run) needs every operator's output
shape. Where torch's own meta kernel refuses inputs the CPU kernel accepts and the output
shape is known, :data:`FALLBACKS` makes the output here:

* ``aten._grouped_mm`` (Mixture-of-Experts in transformers 5): torch 2.13's meta kernel
  accepts only bf16; the output's shape does not depend on the dtype, so the meta kernel is
  asked in bf16 and the output made in the real dtype.

Any other refusal on data-free tensors becomes :class:`NoFakeKernel`, which names the
operator, the module running and the user's source line (never torch's raw error alone).
A refusal on real tensors is the real run's own error and propagates unchanged.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch.utils._pytree import tree_flatten

_aten = torch.ops.aten
_TORCH = str(Path(sys.modules["torch"].__file__ or "torch").parent)
_PACKAGE = str(Path(__file__).resolve().parents[2])


def user_line() -> str | None:
    """``file:line`` of the innermost frame that is neither torch's nor this package's."""
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename
        if not name.startswith((_TORCH, _PACKAGE)) and not name.startswith("<"):
            return f"{name}:{frame.f_lineno}"
        frame = frame.f_back  # type: ignore[assignment]
    return None


class NoFakeKernel(RuntimeError):
    """An operator without a usable meta/fake kernel stopped a data-free pass."""

    def __init__(self, operator: str, module: str | None, line: str | None, error: Exception):
        where = f" in {module}" if module else " outside any module"
        if line:
            where += f" at {line}"
        super().__init__(
            f"{operator} has no usable meta/fake kernel for these inputs{where} "
            f"({type(error).__name__}: {error}); run the pass on real tensors (a CPU model "
            "of a smaller config), or report the operator"
        )
        self.operator, self.module, self.line, self.error = operator, module, line, error


def grouped_mm(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.Tensor:
    """``_grouped_mm``'s output for any float dtype: its shape from the bf16 meta kernel."""
    a, b = args[0], args[1]
    if a.dtype == b.dtype == torch.bfloat16:
        return func(*args, **kwargs)  # type: ignore[no-any-return]
    rest = [x.to(torch.bfloat16) if isinstance(x, torch.Tensor) and x.is_floating_point()
            else x for x in args[2:]]  # fmt: skip
    options = dict(kwargs)
    out_dtype = options.pop("out_dtype", None) or (args[4] if len(args) > 4 else None)
    if "bias" in options and isinstance(options["bias"], torch.Tensor):
        options["bias"] = options["bias"].to(torch.bfloat16)
    shaped = func(a.to(torch.bfloat16), b.to(torch.bfloat16), *rest[:2], **options)
    return torch.empty(shaped.shape, dtype=out_dtype or a.dtype, device=a.device)


FALLBACKS: dict[Any, Callable[[Any, tuple[Any, ...], dict[str, Any]], Any]] = {
    _aten._grouped_mm.default: grouped_mm,
}


def _data_free(args: Any, kwargs: Any) -> bool:
    return any(
        isinstance(item, FakeTensor) or (isinstance(item, torch.Tensor) and item.is_meta)
        for item in tree_flatten((args, kwargs))[0]
    )


def without_kernel(
    func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], error: Exception, module: str | None
) -> Any:
    """The output of an operator whose kernel raised ``error``, or why there is none.

    Real tensors: ``error`` again (the real run's own). Data-free tensors: the package's
    fallback output where one is known, else :class:`NoFakeKernel`.
    """
    if not _data_free(args, kwargs):
        raise error
    fallback = FALLBACKS.get(func)
    if fallback is not None:
        try:
            return fallback(func, args, kwargs)
        except (RuntimeError, NotImplementedError):
            pass  # the inputs are wrong for the real kernel too: say where
    raise NoFakeKernel(str(func), module, user_line(), error) from error
