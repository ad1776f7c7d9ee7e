"""The public entry points: ``measure_flops`` (a report) and ``count_workload`` (for passes)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch

from ..._gc import gc_paused
from ...report import (
    Diagnostic,
    FlopReport,
    IncompleteAnalysisError,
    MetricResult,
)
from ...workloads import eager_compiled_code, lazy_output_diagnostic, no_operators_diagnostic
from ..model_forms import without_data_diagnostics
from .counter import UNSEEN, OperatorCounter
from .fallbacks import NoFakeKernel
from .lookup import classify_custom_mapping
from .stack import ModuleStack, StackOwner
from .tally import check_name


def measure_flops(
    workload: Callable[[], Any],
    *,
    custom_mapping: Mapping[Any, Callable[..., int]] | None = None,
    strict: bool = False,
    name: str | None = None,
) -> FlopReport:
    """Call ``workload()`` once under operator dispatch and report its FLOPs.

    Forward, backward and optimizer steps inside the workload are all counted (scope
    ``workload``). An exception from the workload propagates unchanged; the dispatch mode and
    every hook are removed first. ``strict=True`` raises IncompleteAnalysisError (carrying the
    report) when any operator was uncounted.
    """
    report, _grad = count_workload(workload, custom_mapping=custom_mapping, name=name)
    if strict and not report.total.is_complete:
        raise IncompleteAnalysisError(report, ["total"])
    return report


def count_workload(
    workload: Callable[[], Any],
    *,
    custom_mapping: Mapping[Any, Callable[..., int]] | None = None,
    name: str | None = None,
) -> tuple[FlopReport, bool | None]:
    """measure_flops' pass, also returning the grad mode the workload's operators ran under
    (True if any ran with grad enabled; None if no operator ran): a workload owns its grad
    mode, and measure_workload records what it observed."""
    if not callable(workload):
        raise TypeError(f"workload must be a zero-argument callable, got {type(workload).__name__}")
    custom = classify_custom_mapping(custom_mapping)
    check_name(name)
    tracker = ModuleStack()
    counter = OperatorCounter(custom, owner=StackOwner(tracker.stack))
    stopped: NoFakeKernel | None = None
    with gc_paused(), _recursion_headroom():  # see _gc: flat per-module cost on large models
        with eager_compiled_code() as compiled_notes, tracker, counter:
            try:
                output = workload()
            except NoFakeKernel as stop:  # meta/fake tensors only: a real error propagates
                output, stopped = None, stop
        # a tensor or None is never deferred work: skip the generator / iterator checks
        plain = output is None or isinstance(output, torch.Tensor)
        lazy = None if plain else lazy_output_diagnostic(output, "operator_flops")
        del output
        report = counter.report(name=name, scope="workload", module_rollup=True)
    if counter.data_kind not in (UNSEEN, None):
        report.diagnostics[:0] = without_data_diagnostics(counter.data_kind)
    report.diagnostics[:0] = compiled_notes
    if stopped is not None:
        _mark_stopped(report, stopped)
    _mark_no_work(report, lazy, _no_arithmetic(report))
    if lazy is None and stopped is None:
        _mark_no_operators(report)
    modes = counter.grad_modes
    return report, (True in modes) if modes else None


# module hooks and the dispatch mode add about one Python frame per nesting level to the
# workload's own: a model nested 200 deep that runs plainly must be countable too
RECURSION_HEADROOM = 4000


@contextlib.contextmanager
def _recursion_headroom() -> Iterator[None]:
    """The recursion limit raised to RECURSION_HEADROOM for the pass, restored after."""
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(max(before, RECURSION_HEADROOM))
    try:
        yield
    finally:
        sys.setrecursionlimit(before)


def _mark_no_operators(report: FlopReport) -> None:
    """No operator dispatched at all: a 0 is no evidence (the work may run where dispatch
    cannot see it, e.g. a compiled graph's fused kernels), so the totals are unavailable."""
    calls = sum(entry.calls for entry in report.by_operator.values())
    calls += sum(entry.calls for entry in report.ignored_operators)
    unseen = (
        None
        if calls
        else no_operators_diagnostic(
            0, "operator_flops", "0 FLOPs would be a guess, so the total is unavailable"
        )
    )
    if unseen is None:
        return
    total = report.total
    report.total = MetricResult.unavailable(unit=total.unit, scope=total.scope, method=total.method)
    if report.product_flops is not None:
        product = report.product_flops
        report.product_flops = MetricResult.unavailable(
            unit=product.unit, scope=product.scope, method=product.method
        )
    report.diagnostics.append(unseen)


def _mark_stopped(report: FlopReport, stop: NoFakeKernel) -> None:
    """An operator without a usable meta/fake kernel ended the pass: what ran before it is
    a lower bound, and an error diagnostic names the operator, module and source line."""
    report.total = _lower_bound(report.total)
    if report.product_flops is not None:
        report.product_flops = _lower_bound(report.product_flops)
    report.by_module = {key: _lower_bound(value) for key, value in report.by_module.items()}
    report.diagnostics.append(
        Diagnostic(
            code="fake_unsupported_operator",
            severity="error",
            metric="operator_flops",
            operator=stop.operator,
            path=stop.module,
            message=f"{stop}. Every figure is a lower bound covering the work before it",
        )
    )


def _lower_bound(result: MetricResult) -> MetricResult:
    """What ran before the work was deferred: a lower bound, or nothing when that is 0."""
    known = result.known_value
    if known:
        return MetricResult.partial(
            known, unit=result.unit, scope=result.scope, method=result.method
        )
    return MetricResult.unavailable(unit=result.unit, scope=result.scope, method=result.method)


def _no_arithmetic(report: FlopReport) -> Diagnostic | None:
    """``empty_work`` when operators ran and the complete total is 0 (a batch of 0 gives it).

    Read off the finished count instead of a second dispatch mode beside the counter (which
    would add a dispatch frame to every operator): a zero total is the only case where the
    question arises.
    """
    total = report.total
    if total.status != "complete" or total.value != 0:
        return None
    calls = sum(entry.calls for entry in report.by_operator.values())
    calls += sum(entry.calls for entry in report.ignored_operators)
    if calls == 0:
        return None
    return Diagnostic(
        code="empty_work",
        severity="warning",
        metric="operator_flops",
        count=calls,
        message=f"all {calls} operator call(s) of the workload did no arithmetic: the complete "
        "0 FLOPs describe no work (a batch of 0 gives this; give the workload non-empty "
        "inputs); a workload that only moves data really does 0 FLOPs",
    )


def _mark_no_work(report: FlopReport, lazy: Diagnostic | None, empty: Diagnostic | None) -> None:
    """A lazy workload's counts are lower bounds (its work never ran); an empty one's are
    true for no work, and ``empty_work`` says so beside them."""
    if lazy is not None:
        report.total = _lower_bound(report.total)
        if report.product_flops is not None:
            report.product_flops = _lower_bound(report.product_flops)
        report.by_module = {key: _lower_bound(value) for key, value in report.by_module.items()}
        report.diagnostics.append(lazy)
    elif empty is not None:
        report.diagnostics.append(empty)
