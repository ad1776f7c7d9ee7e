"""Workloads that return unrun work: a generator, coroutine or lazy iterator.

A generator function called as a workload returns at once without running its body, so
every pass would measure nothing and report a complete zero. Such an output is detected
after the call and turned into a ``lazy_output`` diagnostic; its numbers are then lower
bounds (what ran before the work was deferred) or unavailable.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator

from ..report import Diagnostic


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
