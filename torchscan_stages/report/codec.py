"""The compact on-disk form of reports (schema_version 2), written and read without per-record
validation.

Written field by field, a 100,000-record analysis report was 163 MB of JSON, and validating it
record by record took tens of seconds. The compact form stays plain JSON:

* a field equal to its default is left out (the reader fills the default back in);
* ``AnalysisReport.layers`` is stored column-wise, one list per field, and the frozen values a
  record holds (MetricResult, ValueMeta, LayerOperatorFlops) once each in a table, referenced
  by index: ``{"encoding": "columns", "count": N, "columns": {...}, "tables": {...}}``.

Reading checks the layout first (every column present and as long as ``count``, every index
inside its table, every table entry used), validates each table entry once with pydantic and
each column with exact type checks, then builds the records without validating them again;
equal frozen values share one instance, which keeps the heap small. A column that the exact
checks do not vouch for (a ``"3"`` where an integer belongs) takes the slow way: the columns
are expanded back into records and pydantic validates those, so a damaged file is refused with
the same message and field path (``layers.17.params.parameters``) as the field-by-field form,
and accepted with the same result.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from pydantic import BaseModel

from .metric import MetricResult, trusted_construct
from .records import LayerMetrics, LayerOperatorFlops, LayerRecord, ParameterStats, ValueMeta

ENCODING = "columns"
_M = TypeVar("_M", bound=BaseModel)

# LayerRecord fields stored as one plain column each, with the check a column passes on the
# fast path (anything else goes through pydantic, which coerces or refuses like for records)
SCALAR_COLUMNS: dict[str, str] = {
    "path": "str",
    "call_index": "int",
    "name": "str",
    "depth": "int",
    "type": "str",
    "is_leaf": "bool",
    "handler": "str?",
    "inclusive": "bool",
}
# LayerRecord fields holding a frozen model: a column of indexes into the named table
TABLE_COLUMNS: dict[str, str] = {
    "input": "value",
    "output": "value",
    "operator_flops": "operator_flops",
}
TABLE_MODELS: dict[str, type[BaseModel]] = {
    "metric": MetricResult,
    "value": ValueMeta,
    "operator_flops": LayerOperatorFlops,
}
# LayerRecord fields holding a small mutable model: one column per field of that model
PARAM_FIELDS = tuple(ParameterStats.model_fields)
METRIC_FIELDS = tuple(LayerMetrics.model_fields)


class LayoutError(ValueError):
    """The columns or tables do not fit together; ``location`` is a dotted field path."""

    def __init__(self, location: str, message: str) -> None:
        super().__init__(f"{location}: {message}")
        self.location = location


def column_names() -> list[str]:
    """Every column a compact ``layers`` may hold, in the order it is written."""
    return [
        *SCALAR_COLUMNS,
        *TABLE_COLUMNS,
        *(f"params.{name}" for name in PARAM_FIELDS),
        *(f"metrics.{name}" for name in METRIC_FIELDS),
    ]


def _defaults() -> dict[str, Any]:
    """Columns that may be left out, and the value each then stands for."""
    found: dict[str, Any] = {}
    for name, info in LayerRecord.model_fields.items():
        if not info.is_required() and name in {*SCALAR_COLUMNS, *TABLE_COLUMNS}:
            found[name] = info.get_default(call_default_factory=True)
    for name, info in ParameterStats.model_fields.items():
        if not info.is_required():
            found[f"params.{name}"] = info.get_default(call_default_factory=True)
    return found


COLUMN_DEFAULTS = _defaults()


def uncovered_fields() -> set[str]:
    """LayerRecord fields no column holds (empty, or a new field would be silently dropped)."""
    covered = {*SCALAR_COLUMNS, *TABLE_COLUMNS, "params", "metrics"}
    return set(LayerRecord.model_fields) ^ covered


if uncovered_fields():  # a new LayerRecord field needs its column here: fail at import, loudly
    raise RuntimeError(
        f"report.codec has no column for LayerRecord fields {sorted(uncovered_fields())}; "
        "add each to SCALAR_COLUMNS or TABLE_COLUMNS"
    )


# ------------------------------------------------------------------------------- writing


class _Table:
    """Distinct entries of one table; equal models (by content, or the same instance) share one."""

    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []
        self._by_id: dict[int, int] = {}
        self._by_content: dict[str, int] = {}

    def index(self, model: BaseModel | None) -> int | None:
        if model is None:
            return None
        found = self._by_id.get(id(model))  # the models live in the report while it is written
        if found is None:
            entry = model.model_dump(mode="json", exclude_defaults=True)
            key = json.dumps(entry, sort_keys=True)  # keeps 1, 1.0 and true apart
            found = self._by_content.setdefault(key, len(self.entries))
            if found == len(self.entries):
                self.entries.append(entry)
            self._by_id[id(model)] = found
        return found


def encode_layers(layers: list[LayerRecord]) -> dict[str, Any]:
    """``layers`` column-wise with table indexes; a column holding only its default is left out."""
    tables = {name: _Table() for name in TABLE_MODELS}
    columns: dict[str, list[Any]] = {}
    for name in SCALAR_COLUMNS:
        columns[name] = [layer.__dict__[name] for layer in layers]
    for name, table_name in TABLE_COLUMNS.items():
        index = tables[table_name].index
        columns[name] = [index(layer.__dict__[name]) for layer in layers]
    params = [layer.params.__dict__ for layer in layers]
    for name in PARAM_FIELDS:
        columns[f"params.{name}"] = [state[name] for state in params]
    metrics = [layer.metrics.__dict__ for layer in layers]
    metric_index = tables["metric"].index
    for name in METRIC_FIELDS:
        columns[f"metrics.{name}"] = [metric_index(state[name]) for state in metrics]
    for name, default in COLUMN_DEFAULTS.items():
        column = columns[name]
        if all(value == default and type(value) is type(default) for value in column):
            del columns[name]
    return {
        "encoding": ENCODING,
        "count": len(layers),
        "columns": columns,
        "tables": {name: table.entries for name, table in tables.items()},
    }


def encode_report(report: BaseModel, schema_version: int) -> dict[str, Any]:
    """The compact document of any report: defaults left out, analysis layers column-wise."""
    analysis = report if getattr(report, "kind", None) == "analysis" else None
    body = report.model_dump(
        mode="json", exclude_defaults=True, exclude={"layers"} if analysis else None
    )
    body.pop("kind", None)
    body.pop("schema_version", None)
    kind = report.kind  # type: ignore[attr-defined]  # every report model has one
    document = {"kind": kind, "schema_version": schema_version, **body}
    if analysis is not None:
        document["layers"] = encode_layers(analysis.layers)  # type: ignore[attr-defined]  # last: the bulk of the file
    return document


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def dump_text(document: dict[str, Any]) -> str:
    """JSON text with one line per top-level field, per layer column and per table.

    Short lines for people and line-based diffs; no indentation inside a line, which would
    add bytes per list element. NaN and infinity are refused (no reader would accept them).
    """
    lines = []
    for key, value in document.items():
        if key == "layers" and isinstance(value, dict):
            inner = []
            for part, content in value.items():
                if part in ("columns", "tables") and isinstance(content, dict):
                    rows = ",\n".join(f"   {_dumps(k)}: {_dumps(v)}" for k, v in content.items())
                    inner.append(f"  {_dumps(part)}: {{\n{rows}\n  }}")
                else:
                    inner.append(f"  {_dumps(part)}: {_dumps(content)}")
            lines.append(f" {_dumps(key)}: {{\n" + ",\n".join(inner) + "\n }")
        else:
            lines.append(f" {_dumps(key)}: {_dumps(value)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


# ------------------------------------------------------------------------------- reading


def _layout(encoded: Any) -> tuple[int, dict[str, list[Any]], dict[str, list[Any]]]:
    """Check what fits together: keys, column lengths, table entries; (count, columns, tables)."""
    if not isinstance(encoded, dict):
        raise LayoutError("layers", "expected a list of records or a columns object")
    unknown = sorted(set(encoded) - {"encoding", "count", "columns", "tables"})
    if unknown:
        raise LayoutError(f"layers.{unknown[0]}", "unknown key of a columns object")
    if encoded.get("encoding") != ENCODING:
        raise LayoutError(
            "layers.encoding", f"expected {ENCODING!r}, got {encoded.get('encoding')!r}"
        )
    count = encoded.get("count")
    if type(count) is not int or count < 0:
        raise LayoutError("layers.count", f"expected a non-negative integer, got {count!r}")
    columns, tables = encoded.get("columns"), encoded.get("tables", {})
    if not isinstance(columns, dict):
        raise LayoutError("layers.columns", "expected an object of columns")
    if not isinstance(tables, dict):
        raise LayoutError("layers.tables", "expected an object of tables")
    known = column_names()
    for name in columns:
        if name not in known:
            raise LayoutError(f"layers.columns.{name}", "unknown column")
    for name in known:
        if name not in columns and name not in COLUMN_DEFAULTS:
            raise LayoutError(f"layers.columns.{name}", "missing column")
        column = columns.get(name, [])
        if not isinstance(column, list) or (name in columns and len(column) != count):
            raise LayoutError(f"layers.columns.{name}", f"expected a list of {count} values")
    for name, entries in tables.items():
        if name not in TABLE_MODELS:
            raise LayoutError(f"layers.tables.{name}", "unknown table")
        if not isinstance(entries, list):
            raise LayoutError(f"layers.tables.{name}", "expected a list of entries")
    _check_indexes(columns, tables)
    return count, columns, tables


def _index_columns() -> dict[str, str]:
    found = dict(TABLE_COLUMNS)
    found.update({f"metrics.{name}": "metric" for name in METRIC_FIELDS})
    return found


def _check_indexes(columns: dict[str, list[Any]], tables: dict[str, Any]) -> None:
    """Every index an integer inside its table (null only where the field may be null); every
    table entry used, so that no part of the file goes unchecked."""
    used: dict[str, set[Any]] = {name: set() for name in tables}
    for name, table_name in _index_columns().items():
        if name not in columns:
            continue
        size = len(tables.get(table_name, []))
        column, nullable = columns[name], name in _NULLABLE
        # types first, over the whole column: a set would merge 0.0 and True into 0 and 1
        if all(type(i) is int or (i is None and nullable) for i in column):
            distinct = set(column)
            distinct.discard(None)
            if not distinct or (min(distinct) >= 0 and max(distinct) < size):
                used.setdefault(table_name, set()).update(distinct)
                continue
        _raise_bad_index(name, columns[name], table_name, size)
    for table_name, entries in tables.items():
        unused = sorted(set(range(len(entries))) - used.get(table_name, set()))
        if unused:
            raise LayoutError(f"layers.tables.{table_name}.{unused[0]}", "entry used by no layer")


_NULLABLE = ("output", "operator_flops")


def _raise_bad_index(name: str, column: list[Any], table_name: str, size: int) -> None:
    for position, index in enumerate(column):
        if index is None and name in _NULLABLE:
            continue
        if type(index) is not int or not 0 <= index < size:
            raise LayoutError(
                f"layers.columns.{name}.{position}",
                f"expected an index into layers.tables.{table_name} ({size} entries), "
                f"got {index!r}",
            )


_CHECKS: dict[str, Callable[[Iterable[Any]], bool]] = {
    "str": lambda column: all(type(value) is str for value in column),
    "str?": lambda column: all(value is None or type(value) is str for value in column),
    "int": lambda column: all(type(value) is int for value in column),
    "bool": lambda column: all(value is True or value is False for value in column),
    "count": lambda column: all(type(value) is int and value >= 0 for value in column),
}


def _fast_columns_ok(columns: dict[str, list[Any]]) -> bool:
    """Whether every plain column holds exactly the type its field validates to."""
    for name, check in SCALAR_COLUMNS.items():
        if name in columns and not _CHECKS[check](columns[name]):
            return False
    return all(
        _CHECKS["count"](columns[f"params.{name}"])
        for name in PARAM_FIELDS
        if f"params.{name}" in columns
    )


def _shared_strings(column: list[Any]) -> list[Any]:
    """The column with equal strings as one object (json.loads makes one per occurrence)."""
    seen: dict[Any, Any] = {}
    return [seen.setdefault(value, value) for value in column]


def _column(columns: dict[str, list[Any]], name: str, count: int) -> list[Any]:
    if name in columns:
        return columns[name]
    return [COLUMN_DEFAULTS[name]] * count


def _validated_tables(tables: dict[str, list[Any]]) -> dict[str, list[Any]] | None:
    """Each table entry validated once; ``None`` when one is invalid (the slow path names it)."""
    validated: dict[str, list[Any]] = {}
    for name, entries in tables.items():
        model = TABLE_MODELS[name]
        try:
            validated[name] = [model.model_validate(entry) for entry in entries]
        except (ValueError, RecursionError):  # pydantic's ValidationError is a ValueError
            return None
    return validated


def _maker(cls: type[_M]) -> Callable[[tuple[Any, ...]], _M]:
    """A constructor from a tuple of values in field order, for values already checked:
    :func:`report.trusted_construct` with ``in_order`` (its shared fields-set saves a set per
    record, a third of the heap of a large report)."""
    fields = tuple(cls.__pydantic_fields__)

    def make(values: tuple[Any, ...]) -> _M:
        return trusted_construct(cls, dict(zip(fields, values, strict=True)), in_order=True)

    return make


def build_layers(encoded: Any) -> list[LayerRecord] | None:
    """Records from a compact ``layers``; ``None`` when pydantic must judge the columns.

    Raises :class:`LayoutError` when the columns and tables do not fit together.
    """
    count, columns, tables = _layout(encoded)
    if not _fast_columns_ok(columns):
        return None
    models = _validated_tables(tables)
    if models is None:
        return None
    values, metric_table = models.get("value", []), models.get("metric", [])
    op_table = models.get("operator_flops", [])

    def lookup(table: list[Any], name: str) -> list[Any]:
        return [None if i is None else table[i] for i in _column(columns, name, count)]

    fields: dict[str, Any] = {name: _column(columns, name, count) for name in SCALAR_COLUMNS}
    for name in ("name", "type", "handler"):
        fields[name] = _shared_strings(fields[name])
    fields["input"], fields["output"] = lookup(values, "input"), lookup(values, "output")
    fields["operator_flops"] = lookup(op_table, "operator_flops")
    param_rows = zip(*(_column(columns, f"params.{n}", count) for n in PARAM_FIELDS), strict=True)
    fields["params"] = map(_maker(ParameterStats), param_rows)
    metric_rows = zip(*(lookup(metric_table, f"metrics.{n}") for n in METRIC_FIELDS), strict=True)
    fields["metrics"] = map(_maker(LayerMetrics), metric_rows)
    rows = zip(*(fields[name] for name in LayerRecord.model_fields), strict=True)
    return list(map(_maker(LayerRecord), rows))


def expand_layers(encoded: Any) -> list[dict[str, Any]]:
    """The records of a compact ``layers`` as plain dicts, for pydantic to validate."""
    count, columns, tables = _layout(encoded)
    records = []
    for position in range(count):
        record: dict[str, Any] = {}
        for name in SCALAR_COLUMNS:
            if name in columns:
                record[name] = columns[name][position]
        for name, table_name in TABLE_COLUMNS.items():
            if name in columns:
                index = columns[name][position]
                record[name] = None if index is None else tables[table_name][index]
        record["params"] = {
            name: columns[f"params.{name}"][position]
            for name in PARAM_FIELDS
            if f"params.{name}" in columns
        }
        record["metrics"] = {
            name: tables["metric"][columns[f"metrics.{name}"][position]] for name in METRIC_FIELDS
        }
        records.append(record)
    return records


# where a report holds a map of one MetricResult per module (thousands in a large model)
METRIC_MAPS: dict[str, tuple[tuple[str, ...], ...]] = {
    "analysis": (("operator_flops", "by_module"),),
    "flops": (("by_module",),),
    "prediction": (("by_module",),),
    "benchmark": (("flops", "by_module"),),
    "benchmark_comparison": (
        ("baseline", "flops", "by_module"),
        ("candidate", "flops", "by_module"),
    ),
}


def share_metric_maps(kind: str, document: dict[str, Any]) -> None:
    """Validate each distinct entry of the per-module MetricResult maps once, in place.

    Pydantic keeps the validated instances it is given, so equal entries end up as one
    frozen instance and the Python validator of MetricResult runs once per distinct entry
    instead of once per module. A map with an entry that does not validate is left as it was,
    for pydantic to refuse with its field path.
    """
    for path in METRIC_MAPS.get(kind, ()):
        parent: Any = document
        for key in path[:-1]:
            parent = parent.get(key) if isinstance(parent, dict) else None
        mapping = parent.get(path[-1]) if isinstance(parent, dict) else None
        if isinstance(mapping, dict):
            shared = _shared_results(mapping)
            if shared is not None:
                parent[path[-1]] = shared


def _shared_results(mapping: dict[str, Any]) -> dict[str, MetricResult] | None:
    cache: dict[tuple[Any, ...], MetricResult] = {}
    shared: dict[str, MetricResult] = {}
    for key, entry in mapping.items():
        if type(entry) is not dict:
            return None
        # the types keep 1, 1.0 and true apart, which compare and hash equal
        signature = tuple((name, type(value), value) for name, value in entry.items())
        try:
            result = cache.get(signature)
        except TypeError:  # an unhashable value (a list): not a valid MetricResult field
            return None
        if result is None:
            try:
                result = cache[signature] = MetricResult.model_validate(entry)
            except ValueError:  # pydantic's ValidationError
                return None
        shared[key] = result
    return shared
