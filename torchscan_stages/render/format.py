"""Number formatting for people: SI prefixes, binary bytes, time units, status-aware cells.

Every display string has an exact companion (for a ``title`` attribute), so rounding on the
page never hides the measured number. Incomplete results never become a number: partial
shows ``≥ lower bound``, unavailable shows ``—`` and why.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..report import MetricResult, ValueMeta

# the number forms live on the ground floor (report/numbers.py), shared with print(report)
from ..report.numbers import DASH as DASH
from ..report.numbers import human as human
from ..report.numbers import iec_bytes as iec_bytes
from ..report.numbers import seconds as seconds
from ..report.numbers import si as si
from ..report.numbers import thousands as thousands


def exact(value: float, unit: str) -> str:
    """The exact form of ``value`` for a title attribute."""
    if unit == "s":
        return f"{value:.9g} s"
    return f"{thousands(value)} {unit}".rstrip()


@dataclass(frozen=True, slots=True)
class Cell:
    """One displayed number: the text, its exact title and a status class for CSS."""

    text: str
    title: str
    cls: str  # "ok" | "part" | "na"


def metric_cell(
    result: MetricResult | None,
    *,
    reason: str | None = None,
    unit: str | None = None,
    brief: bool = False,
) -> Cell:
    """Status-aware display of a MetricResult; ``unit`` overrides the display unit.

    ``brief`` leaves scope and method out of the title (table columns state them once).
    """
    if result is None:
        return Cell(DASH, "not measured", "na")
    shown_unit = unit if unit is not None else result.unit
    how = "" if brief else f" ({result.scope} · {result.method})"
    if result.status == "unavailable":
        why = f": {reason}" if reason else ""
        return Cell(DASH, f"unavailable{why}{how}", "na")
    number = result.known_value
    assert number is not None  # guaranteed by MetricResult's validator
    text = human(number, shown_unit)
    full = exact(number, result.unit)
    if result.status == "partial":
        return Cell(f"≥ {text}", f"lower bound ≥ {full}{how}", "part")
    return Cell(text, f"{full}{how}", "ok")


# The layer tree's receptive-field column header names this unit once, so its cells show the
# bare number ("3", titled "3 input_positions"): with the unit a narrow column cut it short.
HEADER_UNITS = frozenset({"input_positions"})


def tree_cell(result: MetricResult | None, *, reason: str | None = None) -> Cell:
    """A brief cell for the layer tree: a unit its column header states is not repeated."""
    unit = "" if result is not None and result.unit in HEADER_UNITS else None
    return metric_cell(result, reason=reason, unit=unit, brief=True)


def plain_cell(value: float | None, unit: str) -> Cell:
    """A plain number (not a MetricResult), e.g. a raw statistic or a count."""
    if value is None:
        return Cell(DASH, "not recorded", "na")
    return Cell(human(value, unit), exact(value, unit), "ok")


def describe_value(meta: ValueMeta | None, limit: int = 80) -> str:
    """A compact, readable form of a call's input/output structure: ``[1, 64, 56, 56]``."""
    if meta is None:
        return DASH
    text = _describe(meta, 0)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _describe(meta: ValueMeta, level: int) -> str:
    if meta.kind == "tensor":
        return "[" + ", ".join(str(d) for d in (meta.shape or [])) + "]"
    if meta.kind == "none":
        return "None"
    if meta.kind in ("tuple", "list"):
        items = meta.items or []
        if level >= 3:
            return "(…)" if meta.kind == "tuple" else "[…]"
        if meta.keys and meta.type_name:  # a named tuple: Point(x: [2], y: [2])
            return meta.type_name + _fields(meta, level)
        inner = ", ".join(_describe(item, level + 1) for item in items[:6])
        if len(items) > 6:
            inner += f", … {len(items) - 6} more"
        return f"({inner})" if meta.kind == "tuple" else f"[{inner}]"
    if meta.kind == "dict":
        keys = meta.keys or []
        items = meta.items or []
        parts = [
            f"{key}: {_describe(item, level + 1)}"
            for key, item in zip(keys[:4], items[:4], strict=False)
        ]
        if len(keys) > 4:
            parts.append(f"… {len(keys) - 4} more")
        return "{" + ", ".join(parts) + "}"
    if meta.keys and meta.items is not None and level < 3:  # an object's tensors by attribute
        return (meta.type_name or meta.kind) + _fields(meta, level)
    return meta.type_name or meta.kind


def _fields(meta: ValueMeta, level: int) -> str:
    """``(name: shape, ...)`` of a named tuple's or an object's first four fields."""
    keys, items = meta.keys or [], meta.items or []
    parts = [
        f"{key}: {_describe(item, level + 1)}"
        for key, item in zip(keys[:4], items[:4], strict=False)
    ]
    if len(keys) > 4:
        parts.append(f"… {len(keys) - 4} more")
    return "(" + ", ".join(parts) + ")"


_BYTES_IN_TEXT = re.compile(r"\b(\d{4,}) ?(?:bytes|B)\b")
_LONG_FLOAT = re.compile(r"(?<![\w.])(\d+\.\d{5,})(?![\w.])")


def humanize_text(text: str) -> str:
    """Free text (a diagnostic message, a method note) with its raw numbers made readable:
    ``10166272 bytes`` -> ``9.70 MiB``, ``0.0090446`` -> ``0.009045``. Tables keep the exact
    text in a ``title``; words and identifiers are never touched."""
    text = _BYTES_IN_TEXT.sub(lambda m: iec_bytes(int(m.group(1))), text)
    return _LONG_FLOAT.sub(lambda m: f"{float(m.group(1)):.4g}", text)


def percent(part: float, whole: float) -> str:
    """Share of a whole, ``'12.3 %'``; a dash when the whole is zero."""
    if whole == 0:
        return DASH
    return f"{100.0 * part / whole:.1f} %"
