"""AnalysisReport and FlopReport views: totals, the layer tree, where FLOPs/parameters go.

The layer tree is emitted as a flat list of open/row/close events so the template needs no
recursion and a 5,000-layer model renders in well under a second.
"""

from __future__ import annotations

from dataclasses import dataclass

from markupsafe import Markup

from ..report import (
    AnalysisReport,
    Diagnostic,
    FlopReport,
    LayerRecord,
    MetricResult,
    combine_sum,
)
from .common import reason_for
from .format import DASH, Cell, describe_value, metric_cell, percent, thousands, tree_cell
from .svg import Bar, bar_chart, metric_bar

NOT_RECORDED = Cell(DASH, "not recorded (structure mode or an older report)", "na")
OPEN_DEPTH = 2  # tree levels shown expanded by default
# Above this many records the tree is embedded as compact JSON and drawn by an inline script
# (tree_data.py); at or below it the page stays static HTML that reads without JavaScript.
# 2,000 records make a static tree of about 1 MB that renders in well under a second.
LAZY_LAYERS = 2000
TOP_N = 10
_TOTALS = (
    ("Parameters", "parameters", "parameters"),
    ("Trainable parameters", "trainable_parameters", "parameters"),
    ("Frozen parameters", "frozen_parameters", "parameters"),
    ("Parameter bytes", "parameter_bytes", "bytes"),
    ("Buffer elements", "buffer_elements", "elements"),
    ("Buffer bytes", "buffer_bytes", "bytes"),
)
_COMPUTE = (
    ("Module FLOPs", "module_flops"),
    ("MACs", "macs"),
    ("DMAs", "dmas"),
)


@dataclass(slots=True)
class TotalView:
    label: str
    cell: Cell
    status: str
    reason: str | None


@dataclass(slots=True)
class LayerRow:
    name: str
    title: str
    depth: int
    type: str
    output: str
    output_full: str
    numbers: tuple[Cell, ...]  # parameters, module FLOPs, MACs, DMAs, receptive field
    flagged: str | None
    open: bool = False


class _Node:
    """One record and the calls it encloses (a plain slotted class: 100,000 are built)."""

    __slots__ = ("children", "record")

    def __init__(self, record: LayerRecord) -> None:
        self.record = record
        self.children: list[_Node] = []


def _find_parent(
    record: LayerRecord, position: int, by_path: dict[str, list[tuple[int, _Node]]]
) -> _Node | None:
    """The enclosing call: the nearest record of the longest proper path prefix, one level up.

    A record deeper than its path (a module called again inside its own forward) is first
    nested in an earlier call of its own path. Works for pre-order (parents first) and
    post-order (children first) record lists.
    """
    path = record.path
    if record.depth > (path.count(".") + 1 if path else 0):
        same = [c for c in by_path[path] if c[0] < position and c[1].record.depth < record.depth]
        if same:
            return same[-1][1]
    while True:
        if not path:
            return None
        path = path.rsplit(".", 1)[0] if "." in path else ""
        calls = by_path.get(path)
        if calls is None:
            continue
        if len(calls) == 1:  # the common case: one call of the enclosing module
            if calls[0][1].record.depth < record.depth:
                return calls[0][1]
            continue
        candidates = [c for c in calls if c[1].record.depth < record.depth]
        if candidates:
            before = [c for c in candidates if c[0] < position]
            chosen = before[-1] if before else candidates[0]
            return chosen[1]


def build_tree(layers: list[LayerRecord]) -> list[_Node]:
    """Nest layer records by path; records without an enclosing call become roots."""
    nodes = [_Node(record) for record in layers]
    by_path: dict[str, list[tuple[int, _Node]]] = {}
    for position, node in enumerate(nodes):
        by_path.setdefault(node.record.path, []).append((position, node))
    roots: list[_Node] = []
    for position, node in enumerate(nodes):
        if node.record.depth == 0:
            roots.append(node)
            continue
        parent = _find_parent(node.record, position, by_path)
        if parent is None or parent is node:
            roots.append(node)
        else:
            parent.children.append(node)
    return roots


def params_cell(record: LayerRecord, has_children: bool, held: dict[str, int]) -> Cell:
    """The Parameters cell of a tree row: the subtree's count for a container
    (``held`` is :meth:`AnalysisReport.subtree_parameters`), the own count for a leaf."""
    own = record.params.parameters
    if has_children:
        subtree = held.get(record.path, own)
        return Cell(thousands(subtree), f"{subtree:,} in subtree ({own:,} own)", "ok")
    return Cell(thousands(own), f"{own:,} parameters", "ok")


def output_texts(record: LayerRecord) -> tuple[str, str]:
    """A tree row's output: (at most 80 characters, the full description)."""
    full = describe_value(record.output, limit=2000)
    return (full if len(full) <= 80 else full[:79] + "…"), full


def _layer_row(
    node: _Node, diagnostics: dict[str, list[Diagnostic]], held: dict[str, int]
) -> LayerRow:
    record = node.record
    metrics = record.metrics
    params = params_cell(record, bool(node.children), held)
    layer_diags = diagnostics.get(record.path, [])

    def cell(result: MetricResult, metric: str) -> Cell:
        reason = None
        if result.status != "complete" and layer_diags:
            reason = reason_for(layer_diags, metric, record.path)
        return tree_cell(result, reason=reason)

    cells = (
        cell(metrics.module_flops, "module_flops"),
        cell(metrics.macs, "macs"),
        cell(metrics.dmas, "dmas"),
        cell(metrics.receptive_field, "receptive_field"),
        # operator FLOPs of the whole call (operator dispatch), beside, never added
        metric_cell(record.operator_flops.inclusive, brief=True)
        if record.operator_flops is not None
        else NOT_RECORDED,
    )
    flagged = None
    if layer_diags:
        flagged = "; ".join(f"{d.code}: {d.message}" for d in layer_diags[:3])
    name = record.name or record.path or "(root)"
    # call_index k is "(call k)" in the text table, this page and the JSON alike (0 = first)
    call = f" (call {record.call_index})" if record.call_index else ""
    output, output_full = output_texts(record)
    return LayerRow(
        name=name + call,
        title=f"{record.path or '(root)'} · call {record.call_index}",
        depth=record.depth,
        type=record.type,
        output=output,
        output_full=output_full,
        numbers=(params, *cells),
        flagged=flagged,
    )


def layer_events(
    report: AnalysisReport, roots: list[_Node] | None = None
) -> list[tuple[int, LayerRow | None]]:
    """Flat tree events: (1, row) opens a <details>, (2, row) is a leaf row, (3, None) closes.

    ``roots`` is the report's tree when the caller has built it already."""
    by_path: dict[str, list[Diagnostic]] = {}
    for diag in report.diagnostics:
        if diag.path is not None:
            by_path.setdefault(diag.path, []).append(diag)
    events: list[tuple[int, LayerRow | None]] = []
    held = report.subtree_parameters()
    if roots is None:
        roots = build_tree(report.layers)
    stack: list[tuple[_Node, bool]] = [(root, False) for root in reversed(roots)]
    while stack:
        node, closing = stack.pop()
        if closing:
            events.append((3, None))
            continue
        row = _layer_row(node, by_path, held)
        if node.children:
            row.open = node.record.depth < OPEN_DEPTH
            events.append((1, row))
            stack.append((node, True))
            stack.extend((child, False) for child in reversed(node.children))
        else:
            events.append((2, row))
    return events


def counted_layers(report: AnalysisReport, roots: list[_Node] | None = None) -> list[LayerRecord]:
    """Layers whose metrics are not covered by an ancestor: leaves and inclusive subtrees.

    ``roots`` is the report's tree when the caller has built it already."""
    counted: list[LayerRecord] = []
    stack = list(reversed(roots if roots is not None else build_tree(report.layers)))
    while stack:
        node = stack.pop()
        if node.record.inclusive or not node.children:
            counted.append(node.record)
        else:
            stack.extend(reversed(node.children))
    return counted


def _grouped_bars(
    groups: dict[str, list[MetricResult]], unit_label: str
) -> tuple[list[Bar], list[str]]:
    """One bar per group (combine_sum keeps incompleteness), top N plus an 'other' bar."""
    sums: list[tuple[str, MetricResult]] = []
    missing: list[str] = []
    for name, results in groups.items():
        first = results[0]
        try:
            total = combine_sum(results, unit=first.unit, scope=first.scope, method=first.method)
        except ValueError:
            missing.append(f"{name} (mixed methods)")
            continue
        if total.status == "unavailable":
            missing.append(name)
        else:
            sums.append((name, total))
    sums.sort(key=lambda item: -(item[1].known_value or 0))
    head, tail = sums[:TOP_N], sums[TOP_N:]
    bars = [metric_bar(name, total) for name, total in head]
    if tail:
        known = sum(t.known_value or 0 for _, t in tail)
        status = "complete" if all(t.status == "complete" for _, t in tail) else "partial"
        first = tail[0][1]
        other = MetricResult(
            status=status,
            value=known if status == "complete" else None,
            known_value=known,
            unit=first.unit,
            scope=first.scope,
            method=first.method,
        )
        bars.append(metric_bar(f"{len(tail)} other {unit_label}", other))
    return bars, missing


@dataclass(slots=True)
class Chart:
    title: str
    svg: Markup
    note: str | None = None


def analysis_charts(report: AnalysisReport, roots: list[_Node] | None = None) -> list[Chart]:
    counted = counted_layers(report, roots)
    charts: list[Chart] = []
    if report.mode == "full" and counted:
        by_type: dict[str, list[MetricResult]] = {}
        for layer in counted:
            by_type.setdefault(layer.type, []).append(layer.metrics.module_flops)
        bars, missing = _grouped_bars(by_type, "types")
        charts.append(
            Chart(
                "Module FLOPs by layer type",
                bar_chart(bars, label="module FLOPs by layer type", missing=missing),
                "Leaf layers and inclusive handlers only, so nothing is counted twice.",
            )
        )
        ranked = [layer for layer in counted if layer.metrics.module_flops.status != "unavailable"]
        ranked.sort(key=lambda layer: -(layer.metrics.module_flops.known_value or 0))
        top = [
            metric_bar(layer.path or layer.type, layer.metrics.module_flops)
            for layer in ranked[:TOP_N]
        ]
        charts.append(
            Chart(
                f"Top {min(TOP_N, len(top))} layers by module FLOPs",
                bar_chart(top, label="top layers by module FLOPs"),
            )
        )
    seen: set[str] = set()
    params: dict[str, int] = {}
    param_bytes: dict[str, int] = {}
    for layer in report.layers:
        if layer.path in seen:
            continue
        seen.add(layer.path)
        if layer.params.parameters:
            params[layer.type] = params.get(layer.type, 0) + layer.params.parameters
            param_bytes[layer.type] = param_bytes.get(layer.type, 0) + layer.params.parameter_bytes
    for title, data, unit in (
        ("Parameters by layer type", params, "parameters"),
        ("Parameter bytes by layer type", param_bytes, "bytes"),
    ):
        if not data:
            continue
        groups = {
            name: [MetricResult.complete(value, unit=unit, scope="own", method="module_state")]
            for name, value in data.items()
        }
        bars, _ = _grouped_bars(groups, "types")
        charts.append(Chart(title, bar_chart(bars, label=title.lower())))
    return charts


def analysis_totals(report: AnalysisReport) -> tuple[list[TotalView], list[TotalView]]:
    """(storage totals, compute totals) with reasons for anything incomplete."""
    totals = report.totals

    def view(label: str, name: str, unit: str | None = None) -> TotalView:
        result: MetricResult = getattr(totals, name)
        reason = None
        if result.status != "complete":
            reason = reason_for(report.diagnostics, name) or _fallback_reason(report, result)
        return TotalView(
            label, metric_cell(result, reason=reason, unit=unit), result.status, reason
        )

    storage = [view(label, name, unit) for label, name, unit in _TOTALS]
    compute = [view(label, name) for label, name in _COMPUTE]
    compute.append(view("Operator FLOPs", "operator_flops"))
    return storage, compute


def _fallback_reason(report: AnalysisReport, result: MetricResult) -> str:
    if report.mode == "structure" and result.status == "unavailable":
        return "structure mode records shapes and parameters only"
    codes = sorted({d.code for d in report.diagnostics if d.severity != "info"})
    if codes:
        return "see diagnostics: " + ", ".join(codes[:4])
    return "no diagnostic was recorded for this metric"


# --------------------------------------------------------------------------------- flops


@dataclass(slots=True)
class OperatorRow:
    name: str
    calls: str
    cell: Cell
    share: str


@dataclass(slots=True)
class FlopsView:
    name: str | None
    total: TotalView
    products: TotalView | None
    workload_calls: int
    operators: list[OperatorRow]
    modules: list[tuple[str, Cell]]
    modules_more: int
    modules_inclusive: bool
    ignored: list[tuple[str, str, str]]
    uncounted: list[Diagnostic]
    conventions: dict[str, str]
    chart: Markup | None


def modules_inclusive(report: FlopReport) -> bool:
    """Whether ``by_module`` gives a module its submodules' work too.

    A report may say so in ``conventions["by_module"]``; otherwise the producer decides:
    measure_flops (scope ``workload``) rolls children up, crawl_module's operator pass
    (scope ``forward``) keeps each module's own operators.
    """
    stated = report.conventions.get("by_module")
    if stated is not None:
        return stated.startswith("inclusive")
    return report.total.scope == "workload"


def flops_view(report: FlopReport) -> FlopsView:
    total = report.total
    reason = None
    if total.status != "complete":
        reason = reason_for(report.diagnostics, "total") or (
            f"{len([d for d in report.diagnostics if d.code == 'uncounted_operator'])} "
            "uncounted operator(s); see diagnostics"
        )
    whole = float(total.known_value or 0)
    ranked = sorted(
        report.by_operator.items(), key=lambda item: (-(item[1].flops.known_value or 0), item[0])
    )
    operators = [
        OperatorRow(
            name=name,
            calls=thousands(count.calls),
            cell=metric_cell(count.flops),
            share=percent(float(count.flops.known_value or 0), whole)
            if count.flops.known_value is not None
            else "—",
        )
        for name, count in ranked
    ]
    bars = [
        metric_bar(name, count.flops)
        for name, count in ranked[:12]
        if count.flops.status != "unavailable" and (count.flops.known_value or 0) > 0
    ]
    modules_sorted = sorted(
        report.by_module.items(), key=lambda item: (-(item[1].known_value or 0), item[0])
    )
    products = None
    if report.product_flops is not None:
        share = report.product_flops
        why = None
        if share.status != "complete":
            why = reason_for(report.diagnostics, "product_flops") or reason
        products = TotalView(
            "of which tensor products (FlopCounterMode's convention)",
            metric_cell(share, reason=why),
            share.status,
            why,
        )
    return FlopsView(
        name=report.name,
        total=TotalView("Operator FLOPs", metric_cell(total, reason=reason), total.status, reason),
        products=products,
        workload_calls=report.workload_calls,
        operators=operators,
        modules=[(name, metric_cell(result)) for name, result in modules_sorted[:50]],
        modules_more=max(len(modules_sorted) - 50, 0),
        modules_inclusive=modules_inclusive(report),
        ignored=[(i.operator, thousands(i.calls), i.reason) for i in report.ignored_operators],
        uncounted=[d for d in report.diagnostics if d.code == "uncounted_operator"],
        conventions=dict(report.conventions),
        chart=bar_chart(bars, label="operator FLOPs by operator") if bars else None,
    )
