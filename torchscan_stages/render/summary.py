"""The summary table of an AnalysisReport, for people. The report stays the product.

Markers: a partial value is shown as ``>=N`` (lower bound), an unavailable one as ``n/a``; the
diagnostics follow the table. This module only formats; ``summary()`` (the face) prints it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..report import AnalysisReport, Diagnostic, LayerRecord, ValueMeta
from .text import compact_metric, compact_number

COLUMNS = ("Layer", "Type", "Output shape", "Params", "FLOPs", "MACs", "DMAs", "RF", "Op FLOPs")
PATHS_SHOWN = 3


def describe_shape(meta: ValueMeta | None) -> str:
    """Short text for a table cell: [1, 16, 32, 32], tuples as (a, b), '-' when none."""
    if meta is None:
        return "-"
    if meta.kind == "tensor":
        return "[" + ", ".join(str(d) for d in meta.shape or []) + "]"
    if meta.kind != "dict" and meta.keys and meta.items and meta.type_name:
        # a named tuple's fields or an object's tensors by attribute: Normal(loc: [1, 5], ...)
        pairs = zip(meta.keys[:3], meta.items[:3], strict=False)
        shown = ", ".join(f"{key}: {describe_shape(item)}" for key, item in pairs)
        return f"{meta.type_name}({shown}{', ...' if len(meta.keys) > 3 else ''})"
    if meta.kind in ("tuple", "list"):
        inner = [describe_shape(i) for i in meta.items or [] if i.kind != "none"]
        if len(inner) == 1:
            return inner[0]
        return "(" + ", ".join(inner) + ")"
    if meta.kind == "dict":
        return "{" + ", ".join(meta.keys or []) + "}"
    if meta.kind == "none":
        return "None"
    return meta.type_name or meta.kind


def _layer_row(report: AnalysisReport, layer: LayerRecord, held: dict[str, int]) -> tuple[str, ...]:
    label = "  " * layer.depth + (layer.name or report.model_type)
    if layer.call_index:
        label += f" (call {layer.call_index})"
    count = held.get(layer.path, 0) if layer.path in held else layer.params.parameters
    params = compact_number(count) if count else "-"
    if layer.params.shared_parameters:
        params += " (shared)"
    m = layer.metrics
    operators = layer.operator_flops
    return (
        label,
        layer.type,
        describe_shape(layer.output),
        params,
        compact_metric(m.module_flops),
        compact_metric(m.macs),
        compact_metric(m.dmas),
        compact_metric(m.receptive_field),
        compact_metric(operators.inclusive) if operators is not None else "-",
    )


def _uncalled_row(path: str, held: int, types: Mapping[str, str]) -> tuple[str, ...]:
    """A container that was never called itself (a ModuleList): its place in the tree."""
    depth = path.count(".") + 1
    label = "  " * depth + path.rpartition(".")[2]
    kind = types.get(path, "(not called)")
    return (label, kind, "-", compact_number(held) if held else "-", "-", "-", "-", "-", "-")


def _rows(
    report: AnalysisReport,
    max_depth: int | None,
    types: Mapping[str, str],
    held_by_path: Mapping[str, int] | None = None,
) -> list[tuple[str, ...]]:
    """Table rows in call order, with a row for each uncalled ancestor before its first child,
    so every layer sits under its true parent."""
    held = dict(held_by_path) if held_by_path else report.subtree_parameters()
    shown = {layer.path for layer in report.layers}
    rows: list[tuple[str, ...]] = []
    for layer in report.layers:
        parts = layer.path.split(".") if layer.path else []
        for depth in range(1, len(parts)):
            ancestor = ".".join(parts[:depth])
            if ancestor in shown or (max_depth is not None and depth > max_depth):
                continue
            shown.add(ancestor)
            rows.append(_uncalled_row(ancestor, held.get(ancestor, 0), types))
        if max_depth is None or layer.depth <= max_depth:
            rows.append(_layer_row(report, layer, held))
    return rows


def _diagnostic_lines(report: AnalysisReport) -> list[str]:
    """One line per (severity, code, layer class or operator), with a count and paths."""
    types = {layer.path: layer.type for layer in report.layers}
    groups: dict[tuple[str, str, str], list[Diagnostic]] = {}
    for d in report.diagnostics:
        subject = d.operator or (types.get(d.path, "") if d.path is not None else "")
        groups.setdefault((d.severity, d.code, subject), []).append(d)
    lines = []
    for (severity, code, subject), items in groups.items():
        paths = [d.path or "<root>" for d in items if d.path is not None]
        where = ""
        if paths:
            where = " at " + ", ".join(paths[:PATHS_SHOWN])
            where += f" (+{len(paths) - PATHS_SHOWN} more)" if len(paths) > PATHS_SHOWN else ""
        count = f" x{len(items)}" if len(items) > 1 else ""
        label = f" {subject}" if subject else ""
        lines.append(f"  {severity}: {code}{label}{count}{where}: {items[0].message}")
    return lines


def format_table(
    report: AnalysisReport,
    max_depth: int | None = None,
    types: Mapping[str, str] | None = None,
    held: Mapping[str, int] | None = None,
) -> str:
    """The summary table, totals and grouped diagnostics of a report as plain text.

    ``types`` (path -> class name) names containers that were never called; without it they
    show as ``(not called)``. ``held`` (path -> parameters of its subtree, from the face's
    ``held_parameters`` of the model) makes each Params cell count every parameter under
    the module, called or not; without it the cells sum the records.
    """
    rows = _rows(report, max_depth, types or {}, held)
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
    repeats = any(layer.call_index for layer in report.layers)
    out += [
        # a lazy model's counts are lower bounds (>=N), never a short figure shown as exact
        f"Parameters: {compact_metric(t.parameters)} "
        f"(trainable {compact_metric(t.trainable_parameters)}, "
        f"frozen {compact_metric(t.frozen_parameters)}), "
        f"{compact_metric(t.parameter_bytes)} bytes; "
        f"buffers {compact_metric(t.buffer_elements)} elements",
        f"Module FLOPs: {compact_metric(t.module_flops)}   MACs: {compact_metric(t.macs)}   "
        f"DMAs: {compact_metric(t.dmas)} elements   (method {t.macs.method}, mode {report.mode})",
        f"Operator FLOPs: {compact_metric(t.operator_flops)}{_products(report)}   "
        "(method operator_dispatch, column Op FLOPs; never added to module FLOPs)",
        "Markers: >=N partial (lower bound), n/a unavailable."
        # one numbering in text, HTML and JSON: "(call k)" is the record's call_index k
        + (" (call k): a repeat call, call_index k (the first, 0, unmarked)." if repeats else ""),
    ]
    if report.diagnostics:
        grouped = _diagnostic_lines(report)
        out.append(rule)
        out.append(
            f"Diagnostics ({len(report.diagnostics)} in {len(grouped)} groups; "
            "each listed in the report):"
        )
        out.extend(grouped)
    return "\n".join(out) + "\n"


def _products(report: AnalysisReport) -> str:
    """The tensor-product share of the operator count, when the crawl ran the counter."""
    flops = report.operator_flops
    if flops is None or flops.product_flops is None:
        return ""
    return f", of which tensor products {compact_metric(flops.product_flops)}"
