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

Workloads that call ``torch.compile``'d code (:func:`eager_compiled_code`): every pass that
watches a workload through a dispatch mode (operator counter, memory tracker, work probe)
runs it with compile directives ignored; see there.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

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


class WorkTally:
    """Operator calls and the elements of the tensors they made, for ``empty_work``.

    Outputs of operators that read a tensor are the work done (``computed``); a factory
    operator (``empty``, ``zeros``: no tensor input) makes buffers, not work: batch norm
    allocates its per-channel statistics even for a batch of 0, so its non-empty buffers
    must not hide an empty batch. Factory outputs count only when nothing else ran.
    """

    def __init__(self) -> None:
        self.operators = 0
        self.computing = 0  # operator calls that read at least one tensor
        self.computed = 0  # elements of the non-view outputs of those calls
        self.created = 0  # elements of the outputs of factory operators

    def add(self, args: Any, kwargs: Any, out: Any, view: bool) -> None:
        """Count one operator call (``view``: it returned an alias, so it made nothing)."""
        import torch  # only the dispatch modes call this: torch is loaded by then
        from torch.utils._pytree import tree_flatten

        self.operators += 1
        if view:
            return
        reads = any(isinstance(item, torch.Tensor) for item in tree_flatten((args, kwargs))[0])
        self.computing += reads
        elements = 0
        for item in [out] if isinstance(out, torch.Tensor) else tree_flatten(out)[0]:
            if isinstance(item, torch.Tensor):
                count = item.numel()  # a SymInt under symbolic shapes: not known empty
                elements += count if type(count) is int else 1
        if reads:
            self.computed += elements
        else:
            self.created += elements

    @property
    def elements_out(self) -> int:
        """Elements of the work done: computed ones, else (nothing computed) created ones."""
        return self.computed if self.computing else self.created


def no_operators_diagnostic(operators: int, metric: str, what: str) -> Diagnostic | None:
    """``no_operators`` when the workload dispatched no torch operator at all.

    Nothing dispatched is either no work (``lambda: None``) or work the dispatcher cannot see
    (a compiled graph's fused kernels, numpy, another process): a 0 is then no evidence."""
    if operators:
        return None
    return Diagnostic(
        code="no_operators",
        severity="error",
        metric=metric,
        count=0,
        message="the workload dispatched no torch operator, so there is no evidence of the "
        f"work it did: {what}; give a workload that runs the model",
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


def compiled_frames() -> int:
    """Frames Dynamo has compiled in this process (0 when Dynamo was never loaded)."""
    if "torch._dynamo" not in sys.modules:
        return 0
    counters: Any = sys.modules["torch._dynamo"].utils.counters
    return int(counters["frames"].get("ok", 0))


def _in_place_compiled(module: Any) -> bool:
    return getattr(module, "_compiled_call_impl", None) is not None


@contextmanager
def eager_compiled_code(
    scope: str = "the workload", module: Any = None
) -> Iterator[list[Diagnostic]]:
    """Run the block with ``torch.compile`` directives ignored, leaving compiled code as
    found; yields the list that gets the report's ``compiled_code_eager`` diagnostic (when
    this process compiled code). ``scope`` names the pass in that message.

    Under a dispatch mode (the operator counter) Dynamo cannot run a compiled graph's fused
    kernels through the dispatcher, and entering a compiled frame there can make Dynamo
    recompile it, or mark its code to be skipped from then on: the compiled model then runs
    eagerly after the count (pytorch/pytorch#140909). So every counting pass runs the workload
    under ``torch.compiler.set_stance("force_eager")``: compiled functions run their own Python
    code eagerly (the operators counted are exactly the eager model's), Dynamo is not entered,
    and no cache entry, guard or frame flag changes. The report says so whenever this process
    has compiled code.
    """
    notes: list[Diagnostic] = []
    if "torch._dynamo" not in sys.modules:  # nothing was ever compiled: no stance to set
        yield notes
        return
    with torch.compiler.set_stance("force_eager"):
        yield notes
    frames = compiled_frames()
    if frames or _in_place_compiled(module):
        notes.append(
            Diagnostic(
                code="compiled_code_eager",
                severity="info",
                message=f"this process has torch.compile'd code ({frames} frame(s) compiled): "
                f"{scope} ran under torch.compiler.set_stance('force_eager'), so compiled "
                "functions it called ran their own Python code and were counted as the "
                "eager model (the fused kernels of an inductor graph never pass through "
                "operator dispatch); their compiled graphs, guards and caches are left as "
                "found, with no recompilation",
            )
        )
