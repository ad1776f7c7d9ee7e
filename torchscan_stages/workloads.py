"""What every measurement takes (the ``Workload`` alias) and checks on what a workload returned.

``Workload`` is the one name for a zero-argument callable. A workload owns its model state,
grad mode, precision, transfers and inputs; measuring it only calls it. Its return value is
the output that comparisons hand to the owner's check.

Workloads that do no work: unrun work (a generator) or work on empty tensors.
A generator function called as a workload returns at once without running its body, so
every pass would measure nothing and report a complete zero. Such an output is detected
after the call and turned into a ``lazy_output`` diagnostic; its numbers are then lower
bounds (what ran before the work was deferred) or unavailable.

A workload whose operators all produce empty tensors (a batch of 0) did run, and its numbers
are true for that empty batch, but they are no measurement of the model: ``empty_work`` says
so beside them. These checks live on the ground floor so that analysis and measurement both
use them without importing each other.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from typing import Any

from .report import Diagnostic

Workload = Callable[[], Any]


def is_lazy(output: object) -> bool:
    """Whether ``output`` is work that has not run yet (tensors and lists are not)."""
    return (
        inspect.isgenerator(output)
        or inspect.iscoroutine(output)
        or inspect.isasyncgen(output)
        or isinstance(output, Iterator)
    )


def lazy_output_diagnostic(output: object, metric: str) -> Diagnostic | None:
    """A ``lazy_output`` diagnostic for unrun work (closing it: it will never be run)."""
    if not is_lazy(output):
        return None
    close = getattr(output, "close", None)
    if callable(close) and not inspect.isasyncgen(output):
        close()  # a coroutine never awaited would otherwise warn at garbage collection
    return Diagnostic(
        code="lazy_output",
        severity="error",
        metric=metric,
        message=f"the workload returned a {type(output).__name__} without running it, so the "
        "work it defers was not measured (a generator function or a lazy iterator?); make the "
        "workload do its work before returning, e.g. return list(...) of the results",
    )


def empty_work_diagnostic(operators: int, elements_out: int, metric: str) -> Diagnostic | None:
    """An ``empty_work`` diagnostic when operators ran but every tensor they made was empty."""
    if operators == 0 or elements_out > 0:
        return None
    return Diagnostic(
        code="empty_work",
        severity="error",
        metric=metric,
        count=operators,
        message=f"all {operators} operator call(s) of the workload produced empty tensors "
        "(a batch of 0?): the numbers describe no work; give the workload non-empty inputs",
    )
