"""Where and why a fake run stopped, and what the user can do about it.

An operator the fake mode cannot run (its output depends on tensor values, or it has no
usable fake kernel) ends the prediction: what ran before it is a lower bound. The stop is
raised as :class:`FakeRunStopped`, which names the operator, the innermost module running
(its full dotted path) and the first source line outside torch and this package.
"""

from __future__ import annotations

from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    UnsupportedOperatorException,
)

from ..analysis.operators.fallbacks import user_line
from ..report import Diagnostic

DATA_DEPENDENT = (DataDependentOutputException, DynamicOutputShapeException)
FAKE_LIMITS = (UnsupportedOperatorException, *DATA_DEPENDENT)
__all__ = [
    "DATA_DEPENDENT", "FAKE_LIMITS", "FakeRunStopped", "UnknownValueUsed", "stop_diagnostic",
    "user_line",
]  # fmt: skip


class UnknownValueUsed(RuntimeError):
    """A value the fake run does not have chose a branch, a size or an index
    (``predict/scalar_reads.py``), or was asked for as data (``.numpy()``)."""


class FakeRunStopped(Exception):
    """An operator ended the fake run; carries what the diagnostic needs."""

    def __init__(self, operator: str, module: str | None, line: str | None, error: Exception):
        super().__init__(f"{operator} stopped the fake run: {error}")
        self.operator, self.module, self.line, self.error = operator, module, line, error


def _advice(error: Exception) -> str:
    if isinstance(error, (*DATA_DEPENDENT, UnknownValueUsed)):
        return (
            "the step's next size or branch depends on a value the model computed, which "
            "fake tensors do not have (inputs and small tensors made from them keep their "
            "values; a float read only for logging goes on). If the value is random or "
            "computed from weights, the prediction cannot follow it: for routing whose "
            "sizes the shapes bound (top-k experts), predict_peak_memory(..., "
            "routing='worst_case') predicts the bound; otherwise fix the branch for the "
            "prediction (e.g. a flag), or measure the step with measure_peak_memory"
        )
    return (
        "it has no usable fake (meta) kernel in this torch version; the prediction cannot "
        "see past it. If the real run accepts these inputs, report the operator; a "
        "shape error here would also stop the real run"
    )


def stop_diagnostic(stop: FakeRunStopped) -> Diagnostic:
    """The error diagnostic of a stopped run: operator, module path, source line, advice."""
    where = f" in {stop.module}" if stop.module else " outside any module"
    if stop.line:
        where += f" at {stop.line}"
    return Diagnostic(
        code="fake_unsupported_operator",
        severity="error",
        metric="peak",
        operator=stop.operator,
        path=stop.module,
        message=f"{stop.operator} stopped the fake run{where} ({type(stop.error).__name__}: "
        f"{stop.error}): {_advice(stop.error)}. Every figure is a lower bound covering the "
        "work before it",
    )
