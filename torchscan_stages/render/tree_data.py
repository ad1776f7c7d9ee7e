"""The layer tree of a large AnalysisReport as compact JSON for the page's inline script.

A static ``<details>`` tree costs about 450 bytes and 30 us of rendering per record, so a
100,000-record report gave a 45 MB page. Here every record is a few integers: strings,
cells (text, title, class) and whole row shapes (type, output, the six number cells) are
stored once in tables and referenced by index; a path is stored only when it is not
``parent path + "." + name``; a diagnostic message is stored split around its own path,
so thousands of messages that differ only in the path share their parts. Runs of sibling
subtrees with identical structure and numbers are found here, with their totals computed
by ``combine_sum`` (a lower bound stays a lower bound), and the page shows each run as one
row until a reader expands it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..report import AnalysisReport, Diagnostic, LayerRecord, MetricResult, combine_sum
from .analysis_view import NOT_RECORDED, output_texts, params_cell
from .format import DASH, Cell, describe_value, thousands, tree_cell

RUN_MIN = 3  # this many identical consecutive siblings or more are shown as one row
_CLS = {"ok": 0, "part": 1, "na": 2}
# the layer columns after Parameters, in page order, and the metric names diagnostics use
COLUMNS = ("module_flops", "macs", "dmas", "receptive_field", "operator_flops")
_ADDITIVE = ("module_flops", "macs", "dmas", "operator_flops")


@dataclass(slots=True)
class _Tables:
    """Interning tables: each distinct string, cell and row shape is stored once."""

    strings: list[str] = field(default_factory=list)
    string_ids: dict[str, int] = field(default_factory=dict)
    cells: list[list[int]] = field(default_factory=list)
    cell_ids: dict[Cell, int] = field(default_factory=dict)
    shapes: list[list[int]] = field(default_factory=list)
    shape_ids: dict[tuple[int, ...], int] = field(default_factory=dict)
    metric_cells: dict[tuple[Any, ...], Cell] = field(default_factory=dict)

    def s(self, text: str) -> int:
        found = self.string_ids.get(text)
        if found is None:
            found = self.string_ids[text] = len(self.strings)
            self.strings.append(text)
        return found

    def cell(self, cell: Cell) -> int:
        found = self.cell_ids.get(cell)
        if found is None:
            found = self.cell_ids[cell] = len(self.cells)
            self.cells.append([self.s(cell.text), self.s(cell.title), _CLS[cell.cls]])
        return found

    def metric(self, result: MetricResult | None) -> int:
        """A brief metric cell; the reason of an unavailable one is added by the page."""
        if result is None:
            return self.cell(NOT_RECORDED)
        key = (result.status, result.known_value, result.unit)
        cell = self.metric_cells.get(key)
        if cell is None:
            cell = self.metric_cells[key] = tree_cell(result)
        return self.cell(cell)

    def shape(self, key: tuple[int, ...]) -> int:
        found = self.shape_ids.get(key)
        if found is None:
            found = self.shape_ids[key] = len(self.shapes)
            self.shapes.append(list(key))
        return found


def _results(record: LayerRecord) -> tuple[MetricResult | None, ...]:
    metrics = record.metrics
    ops = record.operator_flops.inclusive if record.operator_flops is not None else None
    return (metrics.module_flops, metrics.macs, metrics.dmas, metrics.receptive_field, ops)


def _output_ids(record: LayerRecord, tables: _Tables) -> tuple[int, int]:
    short, full = output_texts(record)
    return tables.s(short), (-1 if short == full else tables.s(full))


def _row_shape(
    record: LayerRecord, has_children: bool, held: dict[str, int], tables: _Tables
) -> int:
    short, full = _output_ids(record, tables)
    cells = [tables.cell(params_cell(record, has_children, held))]
    cells += [tables.metric(result) for result in _results(record)]
    return tables.shape((tables.s(record.type), short, full, *cells))


def _row_key(record: LayerRecord, has_children: bool, held: dict[str, int]) -> tuple[Any, ...]:
    """Plain values that decide a row's shape: cheaper to hash than to build the cells."""
    out = record.output
    if out is not None and out.kind == "tensor" and out.shape is not None:
        output: Any = tuple(out.shape)
    else:
        output = describe_value(out, limit=2000)
    own = record.params.parameters
    subtree = held.get(record.path, own) if has_children else -1
    metrics = tuple(
        None if r is None else (r.status, r.known_value, r.unit) for r in _results(record)
    )
    return (record.type, output, own, subtree, metrics)


def row_shapes(
    records: list[LayerRecord], children: list[list[int]], held: dict[str, int], tables: _Tables
) -> list[int]:
    """The row shape id of every record; equal plain values reuse the shape already built."""
    known: dict[tuple[Any, ...], int] = {}
    shapes: list[int] = []
    for record, kids in zip(records, children, strict=True):
        key = _row_key(record, bool(kids), held)
        found = known.get(key)
        if found is None:
            found = known[key] = _row_shape(record, bool(kids), held, tables)
        shapes.append(found)
    return shapes


@dataclass(slots=True)
class _Nodes:
    """Records in tree pre-order with their parent index (-1 for a root)."""

    records: list[LayerRecord]
    parents: list[int]
    children: list[list[int]]


def preorder(roots: list[Any]) -> _Nodes:
    """Flatten analysis_view's tree (nodes with ``record`` and ``children``) in pre-order."""
    records: list[LayerRecord] = []
    parents: list[int] = []
    children: list[list[int]] = []
    stack: list[tuple[Any, int]] = [(root, -1) for root in reversed(roots)]
    while stack:
        node, parent = stack.pop()
        index = len(records)
        records.append(node.record)
        parents.append(parent)
        children.append([])
        if parent >= 0:
            children[parent].append(index)
        stack.extend((child, index) for child in reversed(node.children))
    return _Nodes(records, parents, children)


def _signatures(nodes: _Nodes, shapes: list[int]) -> list[int]:
    """Equal ids for subtrees with the same row shapes at the same places (names aside)."""
    ids: dict[tuple[int, ...], int] = {}
    signature = [0] * len(shapes)
    for index in range(len(shapes) - 1, -1, -1):  # children come after their parent
        key = (shapes[index], *(signature[c] for c in nodes.children[index]))
        signature[index] = ids.setdefault(key, len(ids))
    return signature


def _runs(nodes: _Nodes, signature: list[int]) -> list[list[int]]:
    """[parent, first sibling's position, count] per run of >= RUN_MIN identical siblings."""
    runs: list[list[int]] = []
    for parent, kids in enumerate(nodes.children):
        start = 0
        while start < len(kids):
            end = start + 1
            while end < len(kids) and signature[kids[end]] == signature[kids[start]]:
                end += 1
            if end - start >= RUN_MIN:
                runs.append([parent, start, end - start])
            start = end
    return runs


def _run_totals(
    members: list[LayerRecord], held: dict[str, int], has_children: bool, tables: _Tables
) -> list[int]:
    """Cells summing the members' rows: parameters, then each additive column (the
    receptive field, not additive, is the members' shared value)."""
    params = sum(
        held.get(m.path, m.params.parameters) if has_children else m.params.parameters
        for m in members
    )
    cells = [tables.cell(Cell(thousands(params), f"{params:,} parameters in these rows", "ok"))]
    per_column = list(zip(*(_results(m) for m in members), strict=True))
    for name, results in zip(COLUMNS, per_column, strict=True):
        present = [r for r in results if r is not None]
        if name not in _ADDITIVE or len(present) < len(results):
            cells.append(tables.metric(results[0]))
            continue
        first = present[0]
        try:
            total = combine_sum(present, unit=first.unit, scope=first.scope, method=first.method)
        except ValueError as error:  # mixed units, scopes or methods are never added
            cells.append(tables.cell(Cell(DASH, f"not summed: {error}", "na")))
            continue
        cells.append(tables.cell(tree_cell(total)))
    return cells


def _diagnostic(diag: Diagnostic, tables: _Tables) -> list[Any]:
    """[severity, code, metric, path, operator, count, message parts split at the path]."""
    parts = diag.message.split(diag.path) if diag.path else [diag.message]

    def opt(text: str | None) -> int:
        return -1 if text is None else tables.s(text)

    return [
        tables.s(diag.severity),
        tables.s(diag.code),
        opt(diag.metric),
        opt(diag.path),
        opt(diag.operator),
        -1 if diag.count is None else diag.count,
        [tables.s(part) for part in parts],
    ]


def _paths(nodes: _Nodes, tables: _Tables) -> tuple[list[int], dict[str, int]]:
    """Name ids, and the path ids of records whose path does not follow from the parent's."""
    names: list[int] = []
    odd: dict[str, int] = {}
    for index, record in enumerate(nodes.records):
        names.append(tables.s(record.name))
        parent = nodes.parents[index]
        base = nodes.records[parent].path if parent >= 0 else ""
        expected = f"{base}.{record.name}" if base else record.name
        if record.path != expected:
            odd[str(index)] = tables.s(record.path)
    return names, odd


def tree_data(report: AnalysisReport, roots: list[Any], open_depth: int) -> dict[str, Any]:
    """The page's data: see the module docstring; keys are one letter to keep it small."""
    tables = _Tables()
    nodes = preorder(roots)
    held = report.subtree_parameters()
    shapes = row_shapes(nodes.records, nodes.children, held, tables)
    runs: list[list[int]] = []
    for parent, start, count in _runs(nodes, _signatures(nodes, shapes)):
        kids = nodes.children[parent][start : start + count]
        members = [nodes.records[i] for i in kids]
        totals = _run_totals(members, held, bool(nodes.children[kids[0]]), tables)
        runs.append([kids[0], count, *totals])  # members are kids[0] and its next siblings
    names, odd = _paths(nodes, tables)
    calls = {str(i): r.call_index for i, r in enumerate(nodes.records) if r.call_index}
    diagnostics = [_diagnostic(d, tables) for d in report.diagnostics if d.path is not None]
    return {
        "v": 1,
        "o": open_depth,
        "c": COLUMNS,
        "s": tables.strings,
        "e": tables.cells,
        "h": tables.shapes,
        "p": nodes.parents,
        "n": names,
        "k": shapes,
        "x": odd,
        "i": calls,
        "r": runs,
        "d": diagnostics,
    }


def script_json(data: dict[str, Any]) -> str:
    """JSON that is safe inside ``<script type="application/json">``: no ``<``, ``>`` or
    ``&`` (so no ``</script>`` or ``<!--``), no line separators JavaScript would reject."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    for raw, escaped in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(raw, escaped)
    return text
