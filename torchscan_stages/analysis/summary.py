"""summary(): crawl_module plus a table for people. The report stays the product.

Markers: a partial value is shown as ``>=N`` (lower bound), an unavailable one as ``n/a``; the
diagnostics follow the table. Measurement code never prints; this module only formats.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

import torch
from torch import nn

from ..report import AnalysisReport, IncompleteAnalysisError, MetricResult
from .crawl import Mode, crawl_module
from .handlers import ModuleHandler
from .tensor_meta import describe_shape

COLUMNS = ("Layer", "Type", "Output shape", "Params", "FLOPs", "MACs", "DMAs", "RF")


def _number(value: float | int) -> str:
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.3g}"
    value = int(value)
    for threshold, suffix in ((10**12, "T"), (10**9, "G"), (10**6, "M"), (10**3, "k")):
        if abs(value) >= threshold:
            return f"{value / threshold:.2f}{suffix}"
    return str(value)


def format_metric(result: MetricResult) -> str:
    """``1.20M`` when complete, ``>=1.20M`` when partial, ``n/a`` when unavailable."""
    if result.status == "complete":
        assert result.value is not None
        return _number(result.value)
    if result.status == "partial":
        assert result.known_value is not None
        return ">=" + _number(result.known_value)
    return "n/a"


def format_table(report: AnalysisReport, max_depth: int | None = None) -> str:
    """The summary table, totals and diagnostics of a report as plain text."""
    rows: list[tuple[str, ...]] = []
    held = report.subtree_parameters()
    for layer in report.layers:
        if max_depth is not None and layer.depth > max_depth:
            continue
        label = "  " * layer.depth + (layer.name or report.model_type)
        if layer.call_index:
            label += f" (call {layer.call_index})"
        count = layer.params.parameters if layer.is_leaf else held.get(layer.path, 0)
        params = _number(count) if count else "-"
        if layer.params.shared_parameters:
            params += " (shared)"
        m = layer.metrics
        rows.append(
            (
                label,
                layer.type,
                describe_shape(layer.output),
                params,
                format_metric(m.module_flops),
                format_metric(m.macs),
                format_metric(m.dmas),
                format_metric(m.receptive_field),
            )
        )
    widths = [
        max(len(c), *(len(r[i]) for r in rows)) if rows else len(c) for i, c in enumerate(COLUMNS)
    ]

    def line(cells: Sequence[str]) -> str:
        left = [cells[i].ljust(widths[i]) for i in range(3)]
        right = [cells[i].rjust(widths[i]) for i in range(3, len(cells))]
        return "  ".join(left + right).rstrip()

    rule = "-" * len(line(COLUMNS))
    out = [rule, line(COLUMNS), rule, *(line(r) for r in rows), rule]
    t = report.totals
    out += [
        f"Parameters: {_number(t.parameters.value or 0)} "
        f"(trainable {_number(t.trainable_parameters.value or 0)}, "
        f"frozen {_number(t.frozen_parameters.value or 0)}), "
        f"{_number(t.parameter_bytes.value or 0)} bytes; "
        f"buffers {_number(t.buffer_elements.value or 0)} elements",
        f"Module FLOPs: {format_metric(t.module_flops)}   MACs: {format_metric(t.macs)}   "
        f"DMAs: {format_metric(t.dmas)} elements   (method module_formula, mode {report.mode})",
        f"Operator FLOPs: {format_metric(t.operator_flops)}{_products(report)}   "
        "(method operator_dispatch; never added to module FLOPs)",
        "Markers: >=N partial (lower bound), n/a unavailable.",
    ]
    if report.diagnostics:
        out.append(rule)
        out.append(f"Diagnostics ({len(report.diagnostics)}):")
        for d in report.diagnostics:
            where = f" [{d.path or '<root>'}]" if d.path is not None else ""
            out.append(f"  {d.severity}: {d.code}{where}: {d.message}")
    return "\n".join(out) + "\n"


def _products(report: AnalysisReport) -> str:
    """The tensor-product share of the operator count, when the crawl ran the counter."""
    flops = report.operator_flops
    if flops is None or flops.product_flops is None:
        return ""
    return f", of which tensor products {format_metric(flops.product_flops)}"


def summary(
    module: nn.Module,
    input_shape: Sequence[int] | Sequence[Sequence[int]] | None = None,
    *,
    args: Any = None,
    kwargs: Mapping[str, Any] | None = None,
    dtype: torch.dtype | Sequence[torch.dtype] | None = None,
    device: str | torch.device | None = None,
    mode: Mode = "full",
    strict: bool = False,
    custom_mapping: Mapping[Any, Any] | None = None,
    custom_modules: Mapping[type[nn.Module], ModuleHandler] | None = None,
    max_depth: int | None = None,
    file: TextIO | None = None,
) -> AnalysisReport:
    """Print the cost table of one forward call and return its AnalysisReport.

    Under ``strict=True`` an incomplete analysis still prints its table (with the partial
    markers and diagnostics a person needs) before IncompleteAnalysisError is raised.
    """
    if max_depth is not None and (
        isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < 0
    ):
        raise ValueError(f"max_depth must be a non-negative int or None, got {max_depth!r}")
    out = file if file is not None else sys.stdout
    try:
        report = crawl_module(
            module,
            input_shape,
            args=args,
            kwargs=kwargs,
            dtype=dtype,
            device=device,
            mode=mode,
            strict=strict,
            custom_mapping=custom_mapping,
            custom_modules=custom_modules,
        )
    except IncompleteAnalysisError as error:
        if isinstance(error.report, AnalysisReport):
            print(format_table(error.report, max_depth), end="", file=out)
        raise
    print(format_table(report, max_depth), end="", file=out)
    return report
